"""{{name}}: a chorus selector. It picks the panel from the host's model
catalog - the models carrying any of the `tags` in its settings (every model
when there are none), at most `count` of them, never more than the run's
budget allows - and the first of them (or `synthesizers`) merges. When the
run comes with images, PDFs or audio, models that can take them come first
(contract 0.4's `input-modalities`).

    [plugins.{{name}}.settings]
    tags = ["reasoning"]      # optional
    count = 3                 # optional, 1-16
    synthesizers = []         # optional; default: the first model chosen
"""

import json

from componentize_py_types import Err
from wit_world import exports
from wit_world.imports import host, types


def parse(settings: str) -> dict:
    """The settings, or Err with what is wrong (shown by `chorus check`)."""
    try:
        parsed = json.loads(settings or "{}")
    except ValueError as e:
        raise Err(f"settings are not JSON: {e}")
    unknown = sorted(set(parsed) - {"tags", "count", "synthesizers"})
    if unknown:
        raise Err(f"unknown setting(s) {', '.join(unknown)}: expected tags, count, synthesizers")
    count = parsed.get("count", 3)
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= 16:
        raise Err(f"count must be an integer from 1 to 16, got {count!r}")
    for key in ("tags", "synthesizers"):
        value = parsed.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise Err(f"{key} must be a list of strings")
    return {"tags": parsed.get("tags", []), "count": count, "synthesizers": parsed.get("synthesizers", [])}


MODALITY = {types.AttachmentKind.IMAGE: "image", types.AttachmentKind.PDF: "file", types.AttachmentKind.AUDIO: "audio"}


def sees(model, request) -> bool:
    """Whether `model` takes every attachment of the run (a text file, every model reads)."""
    needed = {MODALITY[a.kind] for a in request.attachments if a.kind in MODALITY}
    return needed <= set(model.input_modalities or [])


class Selector(exports.Selector):
    def validate_settings(self, settings):
        parse(settings)

    def select(self, request, settings):
        settings = parse(settings)
        # Leave a call for the merge.
        affordable = max(host.budget().calls_left - 1, 1)
        count = min(settings["count"], affordable)
        tags = set(settings["tags"])
        candidates = [m for m in host.models() if not tags or tags & set(m.tags)]
        chosen = sorted(candidates, key=lambda m: not sees(m, request))[:count]  # stable: catalog order otherwise
        models = [m.id for m in chosen]
        if not models:
            raise Err(f"no model in the catalog has any of the tags {sorted(tags)}")
        notes = [f"{{name}} chose {', '.join(models)}."]
        if count < settings["count"]:
            notes.append(f"The run's budget allowed {count} of the {settings['count']} models asked for.")
        blind = [m.id for m in chosen if not sees(m, request)]
        if blind:
            notes.append(f"{', '.join(blind)} cannot take the run's attachments: they get what the pipeline's "
                         "attachments_for_text_models says.")
        sampling = types.Sampling(temperature=None, top_p=None, max_tokens=None, seed=None)
        return types.Plan(
            panel=[types.Seat(model=m, sampling=sampling) for m in models],
            synthesizers=settings["synthesizers"] or models[:1],
            notes=notes,
        )
