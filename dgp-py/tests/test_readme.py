"""The README's "From Python" example runs as written."""

import re

from conftest import REPO


def test_readme_python_example_runs(tmp_path, monkeypatch):
    text = (REPO / "README.md").read_text()
    section = text.split("## From Python", 1)[1].split("\n## ", 1)[0]
    code = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(code) == 1 and len(code[0].strip().splitlines()) <= 10
    monkeypatch.chdir(tmp_path)
    exec(compile(code[0], "README.md", "exec"), {})
    assert (tmp_path / "model.json").exists()


def test_gpytorch_comparison_script_runs():
    import subprocess
    import sys

    script = REPO / "dgp-py" / "examples" / "gpytorch_vs_dgp.py"
    out = subprocess.run(
        [sys.executable, str(script), "--n", "600", "--steps", "20", "--inducing", "10", "--batch", "200"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    assert "dgp (svi)" in out and "test NLL" in out
    assert "GPyTorch" in out
