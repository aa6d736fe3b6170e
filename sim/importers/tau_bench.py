"""tau-bench results: a JSON list of runs ``{task_id, trial, reward, info, traj}``, one trace per run.

``traj`` is the agent's OpenAI chat history (system policy, the simulated user's turns, assistant turns
with ``tool_calls``, ``role: tool`` results answering them by ``tool_call_id``); it is mapped exactly as
``openai-chat`` maps a messages list (``sim.importers.chat_messages.openai_messages``). Every assistant
message is one call of the agent under test; the simulated user's turns are ``user`` events.

- ``trace_id`` is ``f"{task_id}-{trial}"`` (unique within a file; files of different domains reuse
  them, so ``source_file`` tells the airline and retail runs apart).
- ``outcome``: ``reward`` (the task's 0/1 grade), with ``task_id`` and ``trial``.
- The model and domain come from the file name, which tau-bench writes as ``<model>-<domain>.json``
  (``gpt-4o-airline.json`` -> ``gpt-4o``, ``airline``); another name gives no model.
- No usage: tau-bench stores text only, so every call has unknown usage and sizes are estimates.
- ``recorded_policy`` is ``raw``: the tool-calling agent sends the full history every turn.

Not modelled: the tool definitions (not stored in the results, so no ``tools`` event: recorded requests
were larger by that constant), the user simulator's own calls and cost (``info.user_cost``), and the
graded ``info.reward_info``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from pathlib import Path

from sim.core.types import Trace
from sim.importers import Importer, register
from sim.importers.chat_messages import openai_messages
from sim.importers.common import build_trace, read_json_file
from sim.util.errors import TraceError
from sim.util.limits import number_problem

FORMAT = "tau-bench"
RECORDED_POLICY = {"name": "raw"}
_DOMAINS = ("airline", "retail")
_HEAD_BYTES = 1 << 18
_LIST_OF_OBJECTS = re.compile(rb"^\s*\[\s*\{")


def _sniff(path: Path) -> bool:
    """A list whose first run carries ``task_id`` and ``traj`` near the start (``info`` before ``traj``
    is a few KB): mini-swe-agent and Inspect files are objects, chat lists have no ``task_id``."""
    try:
        with open(path, "rb") as f:
            head = f.read(_HEAD_BYTES)
    except OSError:
        return False
    head = head.removeprefix(b"\xef\xbb\xbf")
    return bool(_LIST_OF_OBJECTS.match(head)) and b'"task_id"' in head and b'"traj"' in head


def model_and_domain(stem: str) -> tuple[str | None, str | None]:
    for d in _DOMAINS:
        if stem.endswith("-" + d) and len(stem) > len(d) + 1:
            return stem[: -len(d) - 1], d
    return None, None


def load(path: Path) -> Iterator[Trace]:
    file = path.name
    data = read_json_file(path)
    if not isinstance(data, list):
        raise TraceError(file, f"expected a list of runs, got {type(data).__name__}")
    model, domain = model_and_domain(path.stem)
    agent = f"tau-bench tool-calling agent ({domain})" if domain else "tau-bench agent"
    for i, run in enumerate(data):
        rec = f"[{i}]"
        if not isinstance(run, Mapping):
            raise TraceError(file, f"expected a run object, got {type(run).__name__}", record=rec)
        for key in ("task_id", "traj"):
            if key not in run:
                raise TraceError(file, "missing", record=rec, field=key)
        task_id, trial = run["task_id"], run.get("trial", 0)
        trace_id = f"{task_id}-{trial}"
        messages, usage, named = openai_messages(run["traj"], file, record=f"{trace_id} ")
        reward = run.get("reward")
        if reward is not None and (problem := number_problem(reward)) is not None:
            raise TraceError(file, problem, record=trace_id, field="reward")
        yield build_trace(
            trace_id=trace_id,
            source_format=FORMAT,
            file=file,
            messages=messages,
            usage=usage,
            model=model or named,
            agent=agent,
            recorded_policy=dict(RECORDED_POLICY),
            outcome={"reward": reward, "task_id": task_id, "trial": trial},
        )


register(Importer(FORMAT, (".json",), _sniff, load))
