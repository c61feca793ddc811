"""A chorus synthesizer written in Python: returns, verbatim, the answer that
agrees most with all the others (the medoid, by word overlap) - a consensus
pick that needs no extra model call.

Build (componentize-py 0.25.1 from PyPI):

    componentize-py -d ../../../wit -w synthesizer-plugin componentize app -o medoid.wasm

then load it in plugins.toml:

    [plugins.medoid]
    path = "medoid.wasm"
    max_memory_mib = 64      # CPython needs ~13 MiB to start
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


class Synthesizer(exports.Synthesizer):
    def synthesize(self, request, plan, completions, settings):
        answered = [
            (index, c.model, c.outcome.value.content)
            for index, c in enumerate(completions)
            if isinstance(c.outcome, Ok) and c.outcome.value.content.strip()
        ]
        notes = [
            f"{c.model} failed: {c.outcome.value.message}"
            for c in completions
            if isinstance(c.outcome, Err)
        ]
        if not answered:
            return answer(types.AnswerKind.NONE, f"No model answered ({len(completions)} tried).", [], notes)
        if len(answered) == 1:
            index, model, text = answered[0]
            note = f"Only {model} answered, so this is its answer verbatim."
            return answer(types.AnswerKind.SINGLE, text, [index], [note] + notes)

        sets = [words(text) for _, _, text in answered]
        scores = [
            sum(overlap(mine, other) for j, other in enumerate(sets) if j != k) / (len(sets) - 1)
            for k, mine in enumerate(sets)
        ]
        best = max(range(len(answered)), key=lambda k: (scores[k], -k))
        index, model, text = answered[best]
        host.log(types.LogLevel.DEBUG, f"medoid scores: {scores}")
        details = json.dumps(
            {"agreement": [{"model": m, "score": round(s, 3)} for (_, m, _), s in zip(answered, scores)]}
        )
        note = f"Picked {model}'s answer: it agrees most with the others ({scores[best]:.2f} average word overlap)."
        return answer(types.AnswerKind.PICK, text, [index], [note] + notes, details)
