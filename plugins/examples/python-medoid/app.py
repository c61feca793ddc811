"""A chorus synthesizer written in Python: returns, verbatim, the answer that
agrees most with all the others (the medoid, by word overlap) - a consensus
pick that needs no extra model call. With web search on, chorus ends the
answer with the numbered sources every answer cited; the pick says which of
those numbers the chosen answer cites (contract 0.4's `reply.citations`).

Build (componentize-py 0.25.1 from PyPI):

    componentize-py -d ../../../wit/0.4.0 -w synthesizer-plugin componentize app -o medoid.wasm

then load it in plugins.toml:

    [plugins.medoid]
    path = "medoid.wasm"
    max_memory_mib = 64      # CPython needs ~13 MiB to start
    settings = { min_agreement = 0.3 }   # optional: below it, the pick says so
"""

import json
import re

from componentize_py_types import Err, Ok
from wit_world import exports
from wit_world.imports import host, types


def words(text: str) -> set:
    return set(re.findall(r"\w+", text.lower()))


def overlap(a: set, b: set) -> float:
    union = a | b
    return 1.0 if not union else len(a & b) / len(union)


def answer(kind, text, sources, notes, details=""):
    return types.Answer(kind=kind, text=text, sources=sources, notes=notes, details=details)


def url_key(url: str) -> str:
    """A URL as chorus compares sources: scheme and host in lower case, no
    fragment, no `utm_*` parameters, no trailing `/`."""
    base, _, query = url.split("#")[0].partition("?")
    parts = base.split("/", 3)
    key = "/".join(parts[:3]).lower() + ("/" + parts[3] if len(parts) > 3 else "").rstrip("/")
    kept = [p for p in query.split("&") if p and not p.startswith("utm_")]
    return key + ("?" + "&".join(kept) if kept else "")


def source_numbers(completions) -> dict:
    """Each cited URL's number in the list chorus ends the answer with: the
    answers' citations in call order, each URL once."""
    numbers = {}
    for c in sorted(completions, key=lambda c: (c.id is None, c.id or 0)):
        if isinstance(c.outcome, Ok):
            for citation in c.outcome.value.citations:
                numbers.setdefault(url_key(citation.url), len(numbers) + 1)
    return numbers


def citing(reply, numbers: dict) -> list:
    """The notes saying which of the listed sources `reply` cites."""
    if not numbers:
        return []
    cites = sorted({numbers[url_key(c.url)] for c in reply.citations})
    if not cites:
        return [f"The chosen answer cites none of the {len(numbers)} sources listed at the end (other answers cited them)."]
    return [f"The chosen answer cites sources {', '.join(f'[{n}]' for n in cites)} of the {len(numbers)} listed at the end."]


def parse_settings(settings: str) -> dict:
    """The settings as a dict, or Err with what is wrong."""
    try:
        parsed = json.loads(settings or "{}")
    except ValueError as e:
        raise Err(f"settings are not JSON: {e}")
    unknown = sorted(set(parsed) - {"min_agreement"})
    if unknown:
        raise Err(f"unknown setting(s) {', '.join(unknown)}: the only setting is min_agreement")
    min_agreement = parsed.get("min_agreement", 0.0)
    if isinstance(min_agreement, bool) or not isinstance(min_agreement, (int, float)) or not 0 <= min_agreement <= 1:
        raise Err(f"min_agreement must be a number from 0 to 1, got {min_agreement!r}")
    return {"min_agreement": float(min_agreement)}


class Synthesizer(exports.Synthesizer):
    def validate_settings(self, settings):
        parse_settings(settings)

    def synthesize(self, request, plan, completions, settings):
        settings = parse_settings(settings)
        # Sources are call ids (contract 0.2): cite the call, not its position.
        answered = [
            (c.id, c.model, c.outcome.value)
            for c in completions
            if c.id is not None and isinstance(c.outcome, Ok) and c.outcome.value.content.strip()
        ]
        notes = [
            f"{c.model} failed: {c.outcome.value.message}"
            for c in completions
            if isinstance(c.outcome, Err)
        ]
        if not answered:
            return answer(types.AnswerKind.NONE, f"No model answered ({len(completions)} tried).", [], notes)
        numbers = source_numbers(completions)
        if len(answered) == 1:
            index, model, reply = answered[0]
            note = f"Only {model} answered, so this is its answer verbatim."
            return answer(types.AnswerKind.SINGLE, reply.content, [index], [note] + citing(reply, numbers) + notes)

        sets = [words(reply.content) for _, _, reply in answered]
        scores = [
            sum(overlap(mine, other) for j, other in enumerate(sets) if j != k) / (len(sets) - 1)
            for k, mine in enumerate(sets)
        ]
        best = max(range(len(answered)), key=lambda k: (scores[k], -k))
        index, model, reply = answered[best]
        host.log(types.LogLevel.DEBUG, f"medoid scores: {scores}")
        details = json.dumps(
            {"agreement": [{"model": m, "score": round(s, 3)} for (_, m, _), s in zip(answered, scores)]}
        )
        note = f"Picked {model}'s answer: it agrees most with the others ({scores[best]:.2f} average word overlap)."
        if scores[best] < settings["min_agreement"]:
            notes.insert(0, f"The answers barely agree (best {scores[best]:.2f} < min_agreement {settings['min_agreement']:.2f}): treat this pick with care.")
        return answer(types.AnswerKind.PICK, reply.content, [index], [note] + citing(reply, numbers) + notes, details)
