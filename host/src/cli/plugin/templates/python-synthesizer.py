"""{{name}}: a chorus synthesizer. It merges the answers with the plan's
synthesizers (tried in order), and is honest about what it returns:
`synthesis` of two or more answers, the lone survivor verbatim as `single`,
`none` when nobody answered, `unmerged` (the answers side by side) when
every synthesizer failed. Its sources are the call ids of the answers it
merged. With web search on, each answer goes to the merge with the web
sources it cites, numbered as the list chorus ends the answer with, and the
merger is asked to cite them by those numbers.

    [plugins.{{name}}.settings]
    instructions = "Merge these answers into the best one."   # optional
"""

import json

from componentize_py_types import Err, Ok
from wit_world import exports
from wit_world.imports import host, types

DEFAULT_INSTRUCTIONS = (
    "You are given a question and several answers to it. Write the single best answer: keep what they "
    "agree on, resolve their disagreements, drop what is wrong. Do not mention the other answers."
)
CITE = (
    "The answers cite web sources, numbered under each answer. Cite the sources you rely on with their "
    "numbers in brackets, like [1], exactly as numbered there; cite no others and do not list them at the end."
)


def parse(settings: str) -> dict:
    """The settings, or Err with what is wrong (shown by `chorus check`)."""
    try:
        parsed = json.loads(settings or "{}")
    except ValueError as e:
        raise Err(f"settings are not JSON: {e}")
    unknown = sorted(set(parsed) - {"instructions"})
    if unknown:
        raise Err(f"unknown setting(s) {', '.join(unknown)}: expected optional `instructions`")
    instructions = parsed.get("instructions", DEFAULT_INSTRUCTIONS)
    if not isinstance(instructions, str) or not instructions.strip():
        raise Err("instructions must be a non-empty string")
    return {"instructions": instructions}


def message(role, text):
    return types.Message(role=role, content=[types.ContentPart_Text(text)])


def answer(kind, text, sources, notes):
    return types.Answer(kind=kind, text=text, sources=sources, notes=notes, details="", tool_calls=[])


def url_key(url):
    """A URL as chorus compares sources: scheme and host in lower case, no
    fragment, no `utm_*` parameters, no trailing `/`."""
    base, _, query = url.split("#")[0].partition("?")
    parts = base.split("/", 3)
    key = "/".join(parts[:3]).lower() + ("/" + parts[3] if len(parts) > 3 else "").rstrip("/")
    kept = [p for p in query.split("&") if p and not p.startswith("utm_")]
    return key + ("?" + "&".join(kept) if kept else "")


def web_sources(completions):
    """The web sources the answers cite (`reply.citations`), numbered as chorus
    numbers the list it ends the answer with: in call order, each URL once."""
    keys = []
    for c in sorted(completions, key=lambda c: (c.id is None, c.id or 0)):
        for citation in c.outcome.value.citations if isinstance(c.outcome, Ok) else []:
            if url_key(citation.url) not in keys:
                keys.append(url_key(citation.url))
    return keys


def cited(reply, sources):
    """What goes under an answer in the merge prompt: the sources it cites, by number."""
    lines = {}
    for citation in reply.citations:
        n = sources.index(url_key(citation.url)) + 1
        title = f"{citation.title} " if citation.title else ""
        lines.setdefault(n, f"[{n}] {title}<{citation.url}>")
    return "\n\nSources this answer cites:\n" + "\n".join(lines.values()) if lines else ""


class Synthesizer(exports.Synthesizer):
    def validate_settings(self, settings):
        parse(settings)

    def choose_tool_calls(self, request, plan, completions, settings):
        # When the run's caller offered tools and the panel proposed calls:
        # leave the choice of call to chorus (the majority's call, else the
        # pipeline's synthesizer model chooses). Return ToolDecision_Merge()
        # to merge the answers into text instead, or ToolDecision_Answer(…)
        # with `tool_calls` to make a call yourself.
        return types.ToolDecision_ByHost()

    def synthesize(self, request, plan, completions, settings):
        settings = parse(settings)
        notes, answered = [], []
        for c in completions:
            if isinstance(c.outcome, Ok) and c.outcome.value.content.strip() and c.id is not None:
                answered.append((c.id, c.model, c.outcome.value))
            elif isinstance(c.outcome, Ok):
                notes.append(f"{c.model} gave an empty answer.")
            else:
                notes.append(f"{c.model} failed: {c.outcome.value.message}")
        if not answered:
            return answer(types.AnswerKind.NONE, f"No model answered ({len(completions)} tried).", [], notes)
        if len(answered) == 1:
            call, model, reply = answered[0]
            return answer(types.AnswerKind.SINGLE, reply.content, [call], [f"Only {model} answered, so this is its answer verbatim."] + notes)
        sources = [call for call, _, _ in answered]
        web = web_sources(completions)
        prompt = f"Question:\n{request.prompt}\n\n" + "".join(
            f"--- Answer {n} ---\n{reply.content.strip()}{cited(reply, web)}\n\n"
            for n, (_, _, reply) in enumerate(answered, 1)
        )
        instructions = settings["instructions"] + (f"\n\n{CITE}" if web else "")
        sampling = types.Sampling(temperature=None, top_p=None, max_tokens=None, seed=None)
        for model in plan.synthesizers:
            host.progress(f"merging {len(answered)} answers with {model}")
            merge = types.ChatRequest(
                label="synthesis",
                model=model,
                messages=[message(types.Role.SYSTEM, instructions), message(types.Role.USER, prompt)],
                sampling=sampling,
                response_format=None,
                tools=None,
            )
            # The merge is the answer, returned word for word: asked with
            # `complete_answer`, its text streams to callers that stream.
            outcome = host.complete_answer(merge).outcome
            if isinstance(outcome, Ok) and outcome.value.content.strip():
                return answer(types.AnswerKind.SYNTHESIS, outcome.value.content, sources,
                              [f"{len(answered)} answers merged by {model}."] + notes)
            notes.append(f"Synthesizer {model} failed: {outcome.value.message if isinstance(outcome, Err) else 'empty answer'}")
        side_by_side = "\n\n".join(f"## {model}\n\n{reply.content.strip()}" for _, model, reply in answered)
        return answer(types.AnswerKind.UNMERGED, side_by_side, sources,
                      ["No synthesizer could merge the answers, so they are shown side by side."] + notes)
