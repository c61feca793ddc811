"""{{name}}: a chorus prompter. Every seat on the panel gets the user's
question after a system prompt from its settings, with the run's attachments
(images, PDFs, files) placed before the question: the host sends each one as
the model takes it, or, to a model that cannot, what the pipeline's
`attachments_for_text_models` says.

    [plugins.{{name}}.settings]
    system = "Answer concisely, and say how sure you are."   # optional
"""

import json

from componentize_py_types import Err
from wit_world import exports
from wit_world.imports import types

DEFAULT_SYSTEM = "Answer the question well: directly, correctly and completely. Say how sure you are."


def parse(settings: str) -> dict:
    """The settings, or Err with what is wrong (shown by `chorus check`)."""
    try:
        parsed = json.loads(settings or "{}")
    except ValueError as e:
        raise Err(f"settings are not JSON: {e}")
    unknown = sorted(set(parsed) - {"system"})
    if unknown:
        raise Err(f"unknown setting(s) {', '.join(unknown)}: expected an optional `system` prompt")
    system = parsed.get("system", DEFAULT_SYSTEM)
    if not isinstance(system, str) or not system.strip():
        raise Err("system must be a non-empty string: leave it out for the default")
    return {"system": system}


def message(role, text):
    return types.Message(role=role, content=[types.ContentPart_Text(text)])


def question(request):
    """The user's message: the run's attachments (by id; the host inlines them), then the question."""
    content = [types.ContentPart_Attachment(a.id) for a in request.attachments]
    content.append(types.ContentPart_Text(request.prompt))
    return types.Message(role=types.Role.USER, content=content)


class Prompter(exports.Prompter):
    def validate_settings(self, settings):
        parse(settings)

    def prompt(self, request, plan, settings):
        settings = parse(settings)
        requests = [
            types.ChatRequest(
                label="panel",
                model=seat.model,
                messages=[message(types.Role.SYSTEM, settings["system"]), question(request)],
                sampling=seat.sampling,
                response_format=None,
                tools=None,
            )
            for seat in plan.panel
        ]
        return types.Prompts(requests=requests, notes=[])
