"""The trust boundary (issue 18, items 1 and 4): configuration never selects code to run, and every bad
config is exit 2 with one line, a crash exit 3.

Each attack names a file it would write (or a module whose import would write one) and asserts that
the file does not exist afterwards and that the exit status is 2. On the code before this boundary, the
``# @package _global_`` policy file named by a ``../`` path wrote its file through ``shutil.copyfile``
and a policy file allow-listed its own module."""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path

import pytest

from sim.cli import main
from sim.util.paths import CONF_DIR, EMBEDDED_SUITE, REPO

SUITE = EMBEDDED_SUITE / "closed_loop.jsonl"


# ---------------------------------------------------------------------------------------------- helpers
@pytest.fixture
def conf(tmp_path, monkeypatch) -> Path:
    """A copy of conf/ that the code under test reads instead of the repository's, so a test can add
    policy files to conf/policy/ without touching the checkout."""
    import sim.config.compose
    import sim.sweep.hydra_app
    import sim.sweep.spec

    copy = tmp_path / "conf"
    shutil.copytree(CONF_DIR, copy)
    for mod in (sim.config.compose, sim.sweep.hydra_app, sim.sweep.spec):
        monkeypatch.setattr(mod, "CONF_DIR", copy)
    return copy


def _errors(capsys) -> list[str]:
    """The lines of standard error (one line per refusal is the contract)."""
    return [line for line in capsys.readouterr().err.splitlines() if line.strip()]


def refused(capsys, argv: list[str], *, written: Path, match: str) -> str:
    """Run ``ctxsim ARGV``: exit status 2, one line on stderr matching ``match``, ``written`` absent."""
    code = main(argv)
    err = _errors(capsys)
    assert code == 2, (code, err)
    assert not written.exists(), f"{written} was written"
    assert len(err) == 1 and err[0].startswith("ctxsim: error: "), err
    assert re.search(match, err[0]), err[0]
    return err[0]


def _evil_file(path: Path, dst: Path, how: str = "copyfile") -> Path:
    """The issue's policy file: ``# @package _global_`` and a Hydra callback whose _target_ writes."""
    if how == "copyfile":
        cb = f"{{_target_: shutil.copyfile, src: {SUITE}, dst: {dst}}}"
    else:  # builtins.open with mode w creates the file on instantiation
        cb = f"{{_target_: builtins.open, file: {dst}, mode: w}}"
    path.write_text(
        "# @package _global_\n"
        "hydra:\n"
        "  callbacks:\n"
        f"    x: {cb}\n"
        "policy:\n"
        "  _target_: sim.policies.raw.Raw\n",
        encoding="utf-8",
    )
    return path


def _by_path(target: Path, conf_dir: Path = CONF_DIR) -> str:
    """``target`` (without .yaml) as a name relative to conf/policy/, the way the attack names it."""
    return os.path.relpath(target.with_suffix(""), conf_dir / "policy")


def _marker_module(tmp_path: Path, monkeypatch, mark: Path, name: str = "evilmod") -> str:
    """A module that writes ``mark`` when imported and holds a Policy subclass ``Evil``."""
    (tmp_path / f"{name}.py").write_text(
        f"open({str(mark)!r}, 'w').close()\n"
        "from dataclasses import dataclass\n"
        "from sim.policies.base import Policy\n"
        "@dataclass(frozen=True)\n"
        "class Evil(Policy):\n"
        "    name = 'evil'\n",
        encoding="utf-8",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop(name, None)
    return name


# ------------------------------------------------------------------- a policy file named by a path
@pytest.mark.parametrize("how", ["copyfile", "open"])
def test_package_global_policy_by_path_under_multirun(tmp_path, capsys, how):
    dst = tmp_path / "PWNED"
    evil = _evil_file(tmp_path / "evil.yaml", dst, how)
    refused(
        capsys,
        ["sweep", "-m", f"policy={_by_path(evil)}", f"scenario={SUITE}", f"results.path={tmp_path / 'r'}"],
        written=dst,
        match=r"unknown policy '\.\./.*evil'; registered: .*raw",
    )
    assert not (tmp_path / "r").exists()


def test_policy_by_path_refused_everywhere(tmp_path, capsys):
    dst = tmp_path / "PWNED"
    name = _by_path(_evil_file(tmp_path / "evil.yaml", dst))
    unknown = r"unknown policy '\.\./"
    refused(capsys, ["run", str(SUITE), "--policy", name], written=dst, match=unknown)
    refused(capsys, ["explain", str(SUITE), "--policy", name, "--call", "0"], written=dst, match=unknown)
    refused(capsys, ["size", str(SUITE), "--policy", name], written=dst, match=unknown)
    refused(capsys, ["bench", "--policy", name, "--repeats", "1"], written=dst, match=unknown)
    out = tmp_path / "r"
    refused(capsys, ["sweep", f"policy={name}", f"results.path={out}"], written=dst, match=unknown)
    refused(capsys, ["sweep", "-m", f"policy=raw,{name}", f"results.path={out}"], written=dst, match=unknown)
    exp = tmp_path / "exp.yaml"
    exp.write_text(f"policy: {name}\nscenario: {SUITE}\n", encoding="utf-8")
    refused(capsys, ["sweep", f"experiment={exp}"], written=dst, match=r"exp\.yaml: key 'policy': unknown")
    assert not out.exists()


def test_gate_names_a_policy_file_by_path(tmp_path, capsys):
    dst = tmp_path / "PWNED"
    name = _by_path(_evil_file(tmp_path / "evil.yaml", dst))
    g = tmp_path / "gate.yaml"
    g.write_text(
        f"suite: {SUITE}\nbaseline: {{policy: raw}}\ncandidate:\n  policy: {name}\n"
        "thresholds: {calls: {max_increase: 0}}\n",
        encoding="utf-8",
    )
    refused(
        capsys,
        ["gate", str(g)],
        written=dst,
        match=r"gate\.yaml: line 4: key 'candidate\.policy': unknown policy",
    )


# ------------------------------------------------------------------ policy files inside conf/policy/
def test_package_directive_in_conf_policy_refused(conf, tmp_path, capsys):
    dst = tmp_path / "PWNED"
    _evil_file(conf / "policy" / "evil.yaml", dst)
    msg = r"conf/policy/evil\.yaml: line 1: a '# @package' directive is not allowed"
    refused(capsys, ["run", str(SUITE), "--policy", "evil"], written=dst, match=msg)
    refused(capsys, ["sweep", "policy=evil", f"results.path={tmp_path / 'r'}"], written=dst, match=msg)
    refused(
        capsys,
        ["sweep", "-m", "policy=evil", f"scenario={SUITE}", f"results.path={tmp_path / 'r'}"],
        written=dst,
        match=msg,
    )


@pytest.mark.parametrize(
    ("text", "match"),
    [
        (
            "hydra:\n  callbacks:\n    x: {{_target_: shutil.copyfile, src: {suite}, dst: {dst}}}\n",
            "key 'hydra' is not allowed",
        ),
        (
            "defaults:\n  - raw\n  - override /hydra/callbacks: x\n  - _self_\n",
            "key 'defaults': entry .* is not allowed",
        ),
        ("defaults:\n  - ../../x\n", "key 'defaults': entry '../../x' is not allowed"),
        ("defaults:\n  - raw@_global_\n", "key 'defaults': entry 'raw@_global_' is not allowed"),
        (
            "_target_: shutil.copyfile\nsrc: {suite}\ndst: {dst}\n",
            "key '_target_': 'shutil.copyfile' is not a registered",
        ),
        (
            "_target_: sim.policies.pipeline.Pipeline\n"
            "steps:\n  - {{_target_: shutil.copyfile, src: {suite}, dst: {dst}}}\n",
            r"key 'steps\[0\]\._target_': a nested _target_ is not allowed",
        ),
        (
            "_target_: sim.policies.observation_masking.ObservationMasking\nn: ${{oc.env:HOME}}\n",
            "key 'n': .* interpolation",
        ),
        ("- 1\n- 2\n", "expected a mapping"),
    ],
)
def test_policy_file_checks(conf, tmp_path, capsys, text, match):
    dst = tmp_path / "PWNED"
    (conf / "policy" / "bad.yaml").write_text(text.format(suite=SUITE, dst=dst), encoding="utf-8")
    refused(
        capsys, ["run", str(SUITE), "--policy", "bad"], written=dst, match=r"conf/policy/bad\.yaml: " + match
    )


def test_a_file_in_the_defaults_chain_is_checked_too(conf, tmp_path, capsys):
    dst = tmp_path / "PWNED"
    _evil_file(conf / "policy" / "base_evil.yaml", dst)
    (conf / "policy" / "nice.yaml").write_text("defaults:\n  - base_evil\n  - _self_\n", encoding="utf-8")
    refused(
        capsys,
        ["run", str(SUITE), "--policy", "nice"],
        written=dst,
        match=r"base_evil\.yaml: line 1: a '# @package'",
    )


# --------------------------------------------------------------- a config allow-listing its own module
def test_policy_file_cannot_allow_list_its_own_module(conf, tmp_path, monkeypatch, capsys):
    mark = tmp_path / "IMPORTED"
    mod = _marker_module(tmp_path, monkeypatch, mark)
    (conf / "policy" / "own.yaml").write_text(
        f"allow_modules: [{mod}]\n_target_: {mod}.Evil\n", encoding="utf-8"
    )
    (conf / "policy" / "own2.yaml").write_text(f"_target_: {mod}.Evil\n", encoding="utf-8")
    refused(
        capsys,
        ["run", str(SUITE), "--policy", "own"],
        written=mark,
        match="key 'allow_modules' is not allowed",
    )
    not_registered = (
        r"own2\.yaml: key '_target_': 'evilmod\.Evil' is not a registered policy class.*--allow-module"
    )
    refused(capsys, ["run", str(SUITE), "--policy", "own2"], written=mark, match=not_registered)
    refused(
        capsys, ["sweep", "policy=own2", f"results.path={tmp_path / 'r'}"], written=mark, match=not_registered
    )
    refused(
        capsys,
        ["sweep", "-m", "policy=own2", f"scenario={SUITE}", f"results.path={tmp_path / 'r'}"],
        written=mark,
        match=not_registered,
    )
    # a package directive is how a file would put allow_modules at the top of the composed config
    (conf / "policy" / "own3.yaml").write_text(
        f"# @package _global_\nallow_modules: [{mod}]\npolicy:\n  _target_: {mod}.Evil\n", encoding="utf-8"
    )
    refused(capsys, ["run", str(SUITE), "--policy", "own3"], written=mark, match="'# @package' directive")


def test_gate_cannot_reach_a_module_without_allow_module(conf, tmp_path, monkeypatch, capsys):
    mark = tmp_path / "IMPORTED"
    mod = _marker_module(tmp_path, monkeypatch, mark)
    (conf / "policy" / "own.yaml").write_text(
        f"allow_modules: [{mod}]\n_target_: {mod}.Evil\n", encoding="utf-8"
    )
    tail = "\nthresholds: {calls: {max_increase: 0}}\n"
    g = tmp_path / "gate.yaml"
    for cand, match in (
        ("{policy: own}", "key 'allow_modules' is not allowed"),
        (f"{{policy: {_by_path(conf / 'policy' / 'own.yaml', conf)}x}}", "unknown policy"),
        (f"{{_target_: {mod}.Evil}}", "--allow-module"),
    ):
        g.write_text(f"suite: {SUITE}\nbaseline: {{policy: raw}}\ncandidate: {cand}{tail}", encoding="utf-8")
        refused(capsys, ["gate", str(g)], written=mark, match=match)


# ------------------------------------------------------------------------------ sweep -m words
@pytest.mark.parametrize(
    "word",
    [
        "hydra/callbacks=basic",
        "hydra.callbacks.x._target_=shutil.copyfile",
        "hydra.callbacks.x.dst={dst}",
        "+hydra.callbacks.x={{_target_:shutil.copyfile,src:{suite},dst:{dst}}}",
        "~hydra.callbacks.merge",
        "hydra.job_logging.root.level=DEBUG",
        "hydra/job_logging=default",
        "hydra/hydra_logging=default",
        "hydra.run.dir={out}",
        "hydra.sweep.dir={out}",
        "hydra.searchpath=[file://{out}]",
        "hydra/sweeper=basic",
        "hydra.launcher._target_=shutil.copyfile",
        "hydra.launcher.x={{_target_:shutil.copyfile,src:{suite},dst:{dst}}}",
        "hydra/launcher=../../x",
        "policy@_global_=raw",
        "experiment=size_seed_engine",
        "policy.steps=[{{_target_:shutil.copyfile,src:{suite},dst:{dst}}}]",
    ],
)
def test_multirun_words_outside_the_allow_list(tmp_path, capsys, word):
    dst, out = tmp_path / "PWNED", tmp_path / "elsewhere"
    word = word.format(dst=dst, suite=SUITE, out=out)
    line = refused(
        capsys,
        ["sweep", "-m", "policy=raw", word, f"scenario={SUITE}", f"results.path={tmp_path / 'r'}"],
        written=dst,
        match=r"sweep -m: '.*': .*; allowed: policy=NAME",
    )
    assert "hydra/launcher=NAME, hydra.launcher.KEY=V" in line
    assert not out.exists() and not (tmp_path / "r").exists()


def test_multirun_launcher_must_be_a_hydra_plugin(conf, tmp_path, capsys):
    """A launcher config of conf/hydra/launcher/ is composed like Hydra's own: its _target_ must be a
    discovered Launcher plugin (defence in depth behind the plain-name rule)."""
    dst = tmp_path / "PWNED"
    (conf / "hydra" / "launcher").mkdir(parents=True)
    (conf / "hydra" / "launcher" / "evil.yaml").write_text(
        f"_target_: shutil.copyfile\nsrc: {SUITE}\ndst: {dst}\n", encoding="utf-8"
    )
    refused(
        capsys,
        [
            "sweep",
            "-m",
            "policy=raw",
            "hydra/launcher=evil",
            f"scenario={SUITE}",
            f"results.path={tmp_path / 'r'}",
        ],
        written=dst,
        match=r"launcher _target_ 'shutil\.copyfile' is not a Hydra launcher plugin; installed: .*Basic",
    )


# ------------------------------------------------------------------------- ${...} interpolation
@pytest.mark.parametrize("value", ["${hydra:runtime.cwd}", "${policy.polling}", "${oc.env:HOME}"])
def test_interpolation_in_overrides_refused(tmp_path, capsys, value):
    nowhere = tmp_path / "r"
    msg = r"interpolation is not allowed"
    word = f"policy.n={value}"
    refused(capsys, ["run", str(SUITE), "--policy", "observation_masking", word], written=nowhere, match=msg)
    refused(
        capsys,
        ["explain", str(SUITE), "--policy", "observation_masking", word, "--call", "0", "--trace", "needle"],
        written=nowhere,
        match=msg,
    )
    refused(
        capsys,
        ["sweep", "policy=observation_masking", word, f"results.path={nowhere}"],
        written=nowhere,
        match=msg,
    )
    refused(
        capsys,
        ["sweep", "-m", "policy=observation_masking", word, f"results.path={nowhere}"],
        written=nowhere,
        match=msg,
    )
    refused(capsys, ["sweep", "policy=raw", f"results.path={value}"], written=nowhere, match=msg)
    exp = tmp_path / "exp.yaml"
    exp.write_text(f"policy: observation_masking\ngrid:\n  policy.n: ['{value}']\n", encoding="utf-8")
    refused(
        capsys,
        ["sweep", f"experiment={exp}"],
        written=nowhere,
        match=r"exp\.yaml: grid key 'policy\.n': .*interpolation",
    )


def test_experiment_file_types_checked(tmp_path, capsys):
    exp = tmp_path / "exp.yaml"
    for text, match in (
        ("policy: raw\nchunk_size: lots\n", "key 'chunk_size': 'lots' is not an integer >= 1"),
        ("policy: raw\ncsv: maybe\n", "key 'csv': 'maybe' is not true or false"),
        ("policy: raw\nallow_modules: [os]\n", "unknown keys allow_modules"),
        ("policy: raw\ngrid: [1, 2]\n", "key 'grid': expected a mapping"),
        ("policy: !!python/name:os.system\n", "exp.yaml: line 1: not valid YAML"),
    ):
        exp.write_text(text, encoding="utf-8")
        refused(capsys, ["sweep", f"experiment={exp}"], written=tmp_path / "r", match=re.escape(match))


# ----------------------------------------------------------------------- the README's own policy
def _readme_policy(tmp_path: Path, monkeypatch, name: str = "userpols") -> str:
    code = re.search(
        r"```python\n(from dataclasses import dataclass.*?)```", (REPO / "README.md").read_text(), re.S
    )
    (tmp_path / f"{name}.py").write_text(code.group(1), encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


def test_readme_own_policy_recipe(conf, tmp_path, monkeypatch, capsys):
    """`conf/policy/NAME.yaml` with its `_target_`, allowed with --allow-module / allow_modules= (also
    under `sweep -m`): runs. Without the command line's allowance: exit 2."""
    mod = _readme_policy(tmp_path, monkeypatch)
    (conf / "policy" / "drop_old_results.yaml").write_text(f"_target_: {mod}.DropOldResults\nkeep: 5\n")
    assert main(["run", str(SUITE), "--policy", "drop_old_results", "policy.keep=2", "--format", "json"]) == 2
    assert "--allow-module" in capsys.readouterr().err
    argv = [
        "run",
        str(SUITE),
        "--policy",
        "drop_old_results",
        "policy.keep=2",
        "--allow-module",
        mod,
        "--format",
        "json",
    ]
    assert main(argv) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert {r["policy"] for r in rows} == {"drop_old_results"} and {r["policy.keep"] for r in rows} == {2}
    words = ["policy=drop_old_results", "policy.keep=1,2", f"scenario={SUITE}", f"allow_modules={mod}"]
    assert main(["sweep", *words, f"results.path={tmp_path / 'pool'}"]) == 0
    assert main(["sweep", "-m", *words, f"results.path={tmp_path / 'hydra'}"]) == 0
    import pandas as pd

    a = pd.read_parquet(tmp_path / "hydra" / "results.parquet")
    b = pd.read_parquet(tmp_path / "pool" / "results.parquet")
    assert len(a) == 2 * len(rows) and a.equals(b)
    capsys.readouterr()
    no_allow = ["sweep", "-m", *words[:-1], f"results.path={tmp_path / 'no'}"]
    refused(capsys, no_allow, written=tmp_path / "no", match="is not a registered policy class")


def test_multirun_jobs_take_allow_modules_from_the_command_line_only():
    from sim.sweep.hydra_app import _task_allow_modules

    assert _task_allow_modules(["policy.keep=1", "allow_modules=[a,b.c]"]) == ("a", "b.c")
    assert _task_allow_modules(["policy.keep=1"]) == ()


# ---------------------------------------------------------------------------------------- gate
GATE = """\
suite: {suite}
pricing: claude-sonnet-4-5
baseline:
  results: base.jsonl
candidate:
  policy: raw
thresholds:
  calls: {{max_increase: 0}}
"""


@pytest.mark.parametrize(
    ("tagged", "line"),
    [
        ("pricing: !!python/object/apply:os.system ['touch {dst}']", 2),
        ("pricing: !!binary aGVsbG8=", 2),
        ("pricing: !mine claude-sonnet-4-5", 2),
        ("pricing: !!python/name:os.system", 2),
    ],
)
def test_gate_file_with_a_yaml_tag(tmp_path, capsys, tagged, line):
    dst = tmp_path / "PWNED"
    g = tmp_path / "gate.yaml"
    g.write_text(GATE.format(suite=SUITE).replace("pricing: claude-sonnet-4-5", tagged.format(dst=dst)))
    refused(
        capsys, ["gate", str(g)], written=dst, match=rf"gate\.yaml: line {line}: YAML tag '.*' is not allowed"
    )


def test_gate_alias_bomb_is_bounded(tmp_path, capsys):
    bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, "
        f"*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n"
        for i in range(8)
    )
    g = tmp_path / "gate.yaml"
    g.write_text(bomb)
    refused(
        capsys, ["gate", str(g)], written=tmp_path / "x", match=r"gate\.yaml: line \d+: expands to more than"
    )


@pytest.fixture(scope="module")
def baseline_rows(tmp_path_factory) -> list[dict]:
    d = tmp_path_factory.mktemp("trustgate")
    (d / "gate.yaml").write_text(GATE.format(suite=SUITE))
    assert main(["gate", str(d / "gate.yaml"), "--update-baseline"]) == 0
    return [json.loads(line) for line in (d / "base.jsonl").read_text().splitlines()]


@pytest.mark.parametrize(
    ("field", "value", "match"),
    [
        ("calls", "18", "field calls: expected a number, got '18'"),
        ("cumulative_input_tokens", True, "field cumulative_input_tokens: expected a number, got True"),
        ("calls", None, "field calls: expected a number, got None"),
        ("facts_lost", -1, "field facts_lost: expected a number >= 0, got -1"),
        ("answer_completed", "false", "field answer_completed: expected true or false, got 'false'"),
        ("trace_id", ["x"], "field trace_id: expected a string"),
    ],
)
def test_gate_baseline_row_with_a_bad_value(tmp_path, capsys, baseline_rows, field, value, match):
    rows = [dict(r) for r in baseline_rows]
    rows[1][field] = value
    (tmp_path / "base.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "gate.yaml").write_text(GATE.format(suite=SUITE))
    refused(
        capsys,
        ["gate", str(tmp_path / "gate.yaml")],
        written=tmp_path / "x",
        match=r"base\.jsonl: line 2: " + re.escape(match),
    )


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
def test_gate_baseline_row_with_nan(tmp_path, capsys, baseline_rows, literal):
    rows = [dict(r) for r in baseline_rows]
    rows[0]["cost_microusd"] = "@@"
    text = "".join(json.dumps(r) + "\n" for r in rows).replace('"@@"', literal)
    (tmp_path / "base.jsonl").write_text(text)
    (tmp_path / "gate.yaml").write_text(GATE.format(suite=SUITE))
    refused(
        capsys, ["gate", str(tmp_path / "gate.yaml")], written=tmp_path / "x", match=r"base\.jsonl: line 1: "
    )


def test_gate_crash_is_exit_3_not_1(tmp_path, capsys, baseline_rows, monkeypatch):
    import sim.gate.args
    import sim.gate.check

    (tmp_path / "base.jsonl").write_text("".join(json.dumps(r) + "\n" for r in baseline_rows))
    (tmp_path / "gate.yaml").write_text(GATE.format(suite=SUITE))
    assert main(["gate", str(tmp_path / "gate.yaml")]) == 0
    capsys.readouterr()

    def broken(rows, metric):
        raise ZeroDivisionError("a bug in an aggregate")

    monkeypatch.setattr(sim.gate.check, "aggregate", broken)
    for run in (
        lambda: main(["gate", str(tmp_path / "gate.yaml")]),
        lambda: sim.gate.args.main([str(tmp_path / "gate.yaml")]),
    ):
        assert run() == 3
        err = _errors(capsys)
        assert len(err) == 1 and err[0].startswith(
            "ctxsim: internal error: ZeroDivisionError: a bug in an aggregate"
        )


# ------------------------------------------------------------------------------ results / report
def test_results_and_report_on_files_that_are_not_results(tmp_path, capsys):
    import pandas as pd

    out = tmp_path / "rep"
    text = tmp_path / "notes.parquet"
    text.write_text("not parquet at all\n")
    traces = tmp_path / "traces.parquet"
    from sim.importers import load_paths
    from sim.trace.io import write_traces

    write_traces(list(load_paths([SUITE])), traces)  # a Parquet file, but of traces
    typed = tmp_path / "typed.parquet"
    pd.DataFrame(
        {
            "policy": ["raw"],
            "cost_microusd": ["lots"],
            "cumulative_input_tokens": [1],
            "cache_read_tokens": [0],
            "compactions": [0],
            "facts_lost": [0],
            "answer_completed": [True],
        }
    ).to_parquet(typed)
    for path, match in (
        (text, r"notes\.parquet: not a readable Parquet file of sweep results"),
        (traces, r"traces\.parquet: not sweep results .*: no column policy, cost_microusd"),
    ):
        refused(capsys, ["results", str(path)], written=out, match=match)
        refused(capsys, ["report", str(path), "-o", str(out)], written=out, match=match)
    refused(
        capsys,
        ["results", str(typed)],
        written=out,
        match=r"typed\.parquet: column cost_microusd: expected numbers",
    )
    ok = tmp_path / "ok.parquet"
    df = pd.read_parquet(typed)
    df["cost_microusd"] = [5]
    df.to_parquet(ok)
    assert main(["results", str(ok), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["runs"] == 1
    refused(
        capsys,
        ["report", str(ok), "-o", str(out)],
        written=out,
        match=r"no column trace_id, trace_hash, scenario, calls",
    )


# ------------------------------------------------------------------ defence in depth and job errors
def test_multirun_compares_the_whole_hydra_config(conf, tmp_path, monkeypatch, capsys):
    """Were a policy file's check to miss something, composing the Hydra config before the multirun
    would still find the change: here the check is switched off and the evil file is found anyway."""
    import sim.config.compose

    dst = tmp_path / "PWNED"
    _evil_file(conf / "policy" / "evil.yaml", dst)
    monkeypatch.setattr(sim.config.compose, "check_policy_file", lambda name, allow=(): None)
    refused(
        capsys,
        ["sweep", "-m", "policy=evil", f"scenario={SUITE}", f"results.path={tmp_path / 'r'}"],
        written=dst,
        match=r"policy 'evil' sets hydra\.callbacks\.x, not ctxsim's; only the launcher may differ",
    )
    (conf / "sweep_app.yaml").write_text(
        (conf / "sweep_app.yaml").read_text()
        + f"  callbacks:\n    x:\n      _target_: shutil.copyfile\n      src: {SUITE}\n      dst: {dst}\n"
    )
    refused(
        capsys,
        ["sweep", "-m", "policy=raw", f"scenario={SUITE}", f"results.path={tmp_path / 'r'}"],
        written=dst,
        match=r"conf/sweep_app\.yaml: hydra callbacks or logging are not ctxsim's own",
    )


def test_multirun_bad_trace_is_exit_2(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"bad": 1}\n')
    assert main(["sweep", "-m", "policy=raw", f"scenario={bad}", f"results.path={tmp_path / 'r'}"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[-1].startswith("ctxsim: error: bad.jsonl: unknown format"), err


def test_entry_point_policy_without_a_file(tmp_path, monkeypatch, capsys):
    """A registered policy with no conf/policy file (an installed package's entry point) composes from
    its dataclass defaults, for run and under sweep -m."""
    from sim.policies.base import _REGISTRY, load_entry_points

    (tmp_path / "ctxsim_trust_pkg.py").write_text(
        "from dataclasses import dataclass\n"
        "from sim.policies.base import Policy\n"
        "@dataclass(frozen=True)\n"
        "class Nothing(Policy):\n"
        "    k: int = 3\n"
        "    name = 'trust_nothing'\n"
    )
    dist = tmp_path / "ctxsim_trust_pkg-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: ctxsim-trust-pkg\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[ctxsim.policies]\ntrust_nothing = ctxsim_trust_pkg:Nothing\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        assert load_entry_points() == ["trust_nothing"]
        assert main(["run", str(SUITE), "--policy", "trust_nothing", "policy.k=5", "--format", "json"]) == 0
        rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        assert len(rows) == 4 and {(r["policy"], r["policy.k"]) for r in rows} == {("trust_nothing", 5)}
        words = [
            "policy=trust_nothing",
            "policy.k=1,2",
            f"scenario={SUITE}",
            f"results.path={tmp_path / 'm'}",
        ]
        assert main(["sweep", "-m", *words]) == 0
        import pandas as pd

        df = pd.read_parquet(tmp_path / "m" / "results.parquet")
        assert sorted(df["policy.k"].tolist()) == [1, 1, 1, 1, 2, 2, 2, 2]
    finally:
        _REGISTRY.pop("trust_nothing", None)


@pytest.mark.parametrize(
    "word",
    [
        "hydra.callbacks.x._target_=shutil.copyfile",
        "+hydra.callbacks.x={{_target_:shutil.copyfile,src:{suite},dst:{dst}}}",
        "hydra.job_logging.root.level=DEBUG",
        "+allow_modules=[os]",
        "policy._target_=shutil.copyfile",
        "policy.steps=[{{_target_:builtins.print}}]",  # no comma: a sweep splits values at commas
    ],
)
def test_run_and_sweep_overrides_cannot_select_code(tmp_path, capsys, word):
    dst = tmp_path / "PWNED"
    word = word.format(suite=SUITE, dst=dst)
    match = r"only policy\.KEY=VALUE|has no knob '_target_'|nested _target_|is not one of"
    refused(capsys, ["run", str(SUITE), "--policy", "pipeline", word], written=dst, match=match)
    refused(
        capsys,
        ["sweep", "policy=pipeline", word, f"scenario={SUITE}", f"results.path={tmp_path / 'r'}"],
        written=dst,
        match=match + "|none of the 1 settings",
    )


def test_typed_errors_survive_pickling():
    """A worker process (the sweep's pool, a Hydra launcher) sends errors back pickled: each typed error
    must come back as itself with the same message, or the parent sees a crash (exit 3) instead of 2."""
    import pickle

    from sim.gate.gatefile import GateError
    from sim.util.errors import ConfigError, TraceError, UnknownNameError

    for exc in (
        TraceError("a.jsonl", "bad", record="line 3", field="calls[0].input_tokens"),
        TraceError("a.jsonl", "bad"),
        UnknownNameError("policy", "rw", ["raw", "seed_engine"]),
        GateError("g.yaml", 4, "thresholds.calls", "unknown metric"),
        ConfigError("plain"),
    ):
        back = pickle.loads(pickle.dumps(exc))
        assert type(back) is type(exc) and str(back) == str(exc)
