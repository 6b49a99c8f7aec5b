"""The README's code runs: every ```python block, in order, in one namespace.

The blocks run in a scratch directory, which they must leave empty (they
write their checkpoints, SavedModel and Keras file into a temporary directory
of their own, `workdir`), and what they print is checked against the outputs
the README shows in its comments.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"

_PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


def python_blocks(text: str) -> list[tuple[int, str]]:
    """`(first line number, code)` of each ```python block."""
    return [
        (text.count("\n", 0, match.start(1)) + 1, match.group(1))
        for match in _PYTHON_BLOCK.finditer(text)
    ]


def test_python_blocks_are_found():
    text = "a\n```python\nx = 1\n```\n\n```sh\nls\n```\n```python\ny = 2\n```\n"
    assert python_blocks(text) == [(3, "x = 1\n"), (10, "y = 2\n")]


def test_readme_code_runs(tmp_path, monkeypatch, capsys):
    blocks = python_blocks(README.read_text())
    assert len(blocks) >= 6
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "readme"}
    for line, code in blocks:
        # Padded so that tracebacks point at the README's own line numbers.
        exec(compile("\n" * (line - 1) + code, str(README), "exec"), namespace)
    printed = capsys.readouterr().out
    for shown in [
        "(8, 10)",
        "['mlp/linear_0/b:0', 'mlp/linear_0/w:0', 'mlp/linear_1/b:0', "
        "'mlp/linear_1/w:0']",
        "(2, 3)",
        "Sequential(layers=[Scale(), Linear(output_size=3)])",
        "['scale/scale:0', 'linear/b:0', 'linear/w:0']",
        "Linear(output_size=4) does not currently contain any variables",
        "loss after 5 steps",
        "bfloat16 {'float32'}",
        "[0.0, 0.0005, 0.001, 0.00055, 0.0001]",
        "['module/_layers/0/b/.ATTRIBUTES/VARIABLE_VALUE', "
        "'module/_layers/0/w/.ATTRIBUTES/VARIABLE_VALUE']",
        "| mlp/linear_0/w | f32[784,64] | True ",
        "mlp/linear_0  Linear   f32[8,64]       50,240                0  200,960  "
        "803,328",
        "replica(s), loss",
        "Keras trains the MLP's own w: True",
        "(2, 10, 64)\n(1, 3, 100)\n(1, 5)",
        "6 transformer/stack/block/attention/key\n[[4, 16, 2], [4, 2, 16]]",
        "[4, None, 4, None]\n[4, 12, 4, 12]",
        "[None, 4, None, 4] ['load_balancing', 'router_z']\n"
        "['transformer/block_1/mlp_experts/b_in:0', ",
        "['config.json', 'model.safetensors']\nllama 2",
        "(32, 16) True",
        "(2, 6)\ngreedy = argmax of each prefix: True\nseeded: True",
        "['adapter_config.json', 'adapter_model.safetensors']\n"
        "adapters read back: True",
        "['head/b:0', 'head/w:0']",
        "12 adapters, 4,608 of 30,080 parameters trainable",
        "LoRA loss goes down: True",
        "merged: True",
        "plain again: True",
        "bytes: 0.26 of float32",
        "close: True",
        "applied: [False, False, False, True] traces: 1",
        "averaged: 2.0\nlive: 3.0",
        "Muon trains 6 of 21 variables",
        "['mlp/linear_0', 'mlp/linear_1']",
        "largest singular value: 1.0",
        "trainable: ['mlp/linear_0/b:0', 'mlp/linear_0/w:0']",
        "[0.0, 2.0]\nTrue",
        "[0.0, 0.1, 0.2, 0.3]",
        "Linear(output_size=32, name='mlp_in')",
        "`blocks` has no item '2' (it has 2 items)",
        "['blocks/0/mlp_out', 'blocks/1/mlp_out'] True",
    ]:
        assert shown in printed, f"README output missing {shown!r}:\n{printed}"
    workdir = Path(str(namespace["workdir"]))
    assert (workdir / "saved_mlp" / "saved_model.pb").is_file()
    assert (workdir / "head.keras").is_file()
    assert not list(tmp_path.iterdir()), "the tour wrote into the working directory"


def test_readme_quick_start_and_test_commands():
    text = README.read_text()
    quick_start = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    commands = re.findall(r"^```sh\n(.*?)\n```", quick_start, re.DOTALL | re.MULTILINE)
    # The fast subset first; how long the whole suite takes is said.
    assert commands == [
        'pip install -e ".[examples]" && python examples/mlp_digits.py',
        'pip install -e ".[test,dev,examples]" && '
        'python -m pytest -n 2 -q -m "not slow"',
    ]
    assert "`python -m pytest -n 2 -q`, takes well over 10 minutes" in quick_start
    run_tests = text.split("## Run the tests", 1)[1]
    assert "```sh\npython -m pytest -n 2 -q\n```" in run_tests
    for section in ["## Migrating from dm-sonnet", "## Security", "## Benchmarks"]:
        assert section in text
    assert (ROOT / "examples" / "mlp_digits.py").is_file()


def test_readme_is_a_guide():
    text = README.read_text()
    # The migration details live in their own guide, linked from a summary.
    migrating = text.split("## Migrating from dm-sonnet", 1)[1].split("\n## ", 1)[0]
    assert "(docs/MIGRATING.md)" in migrating and len(migrating.splitlines()) < 20
    guide = (ROOT / "docs" / "MIGRATING.md").read_text()
    assert "Refused where 2.0.2 returned garbage" in guide
    # The tour says what and how; measurements are bench/README.md's.
    tour = text.split("## A tour", 1)[1].split("\n## ", 1)[0]
    for phrase in ["we aimed for", "this project's machines", "GiB", "2-core"]:
        assert phrase not in tour, phrase
    assert "### Training loop toolkit" in tour
