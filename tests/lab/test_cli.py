"""The tripy-lab command: subcommands, JupyterLab's options passed through, --allow-root as root, signals
forwarded to JupyterLab, doctor, explain and report."""

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tripy_lab.lab.cli import doctor
from tripy_lab.lab.cli import main as cli

SRC = str(Path(cli.__file__).resolve().parents[3])


def test_print_command_opens_the_quickstart_and_passes_options_through(tmp_path, capsys):
    nb = tmp_path / "notebooks"
    nb.mkdir()
    (nb / cli.QUICKSTART).write_text("{}")
    assert cli.main(["lab", str(nb), "--print-command", "--no-browser", "--port", "8899", "--ServerApp.token=x"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(sys.executable) and "-m jupyterlab" in out
    assert f"--ServerApp.root_dir={nb}" in out and "--LabApp.default_url=/lab/tree/01-quickstart.ipynb" in out
    assert out.rstrip().endswith("--port 8899 --ServerApp.token=x") and "--no-browser" in out
    # Without a subcommand the options mean `lab` too; `8899` is the port's value, not a folder.
    assert cli.main(["--port", "8899", "--print-command"]) == 0
    assert "--port 8899" in capsys.readouterr().out


def test_allow_root_is_added_only_as_root_and_only_once(tmp_path):
    assert "--allow-root" in cli.build_command(tmp_path, ["--port=1"], root=True)
    assert "--allow-root" not in cli.build_command(tmp_path, ["--port=1"], root=False)
    assert cli.build_command(tmp_path, ["--allow-root"], root=True).count("--allow-root") == 1


def test_version_is_ours(capsys):
    import tripy_lab

    with pytest.raises(SystemExit) as exit_:
        cli.main(["--version"])
    assert exit_.value.code == 0 and capsys.readouterr().out.strip() == f"tripy-lab {tripy_lab.__version__}"


def test_unknown_commands_are_errors_not_folders(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "doktor").mkdir()  # even when such a folder exists
    with pytest.raises(SystemExit) as exit_:
        cli.main(["doktor"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "unknown command 'doktor'" in err and "tripy-lab lab doktor" in err
    with pytest.raises(SystemExit):
        cli.main(["doctor", "--port", "1"])  # only `lab` takes JupyterLab's options
    assert "unrecognized arguments: --port 1" in capsys.readouterr().err


def test_help_is_plain_text(capsys):
    for argv in (["--help"], ["lab", "--help"], ["explain", "--help"]):
        with pytest.raises(SystemExit):
            cli.main(argv)
        text = capsys.readouterr().out
        assert "``" not in text and ":class:" not in text and "usage: tripy-lab" in text
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    text = capsys.readouterr().out
    assert all(cmd in text for cmd in cli.COMMANDS)


def test_finds_notebooks_in_a_parent(tmp_path):
    (tmp_path / "notebooks").mkdir()
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    assert cli.find_notebooks(deep) == tmp_path / "notebooks"


def test_repo_notebooks_found_from_anywhere(tmp_path, monkeypatch):
    # From a checkout: the repo's notebooks/; from an installed wheel: a home copy of the packaged ones.
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    found = cli.find_notebooks(tmp_path)
    assert found is not None and (found / cli.QUICKSTART).exists()


def test_missing_folder_is_an_error(tmp_path, capsys):
    assert cli.main(["lab", str(tmp_path / "nope")]) == 2
    assert "is not a folder" in capsys.readouterr().err


CHILD = textwrap.dedent("""
    import signal, sys, time
    def bye(signum, frame):
        open(sys.argv[1], "w").write(signal.Signals(signum).name)
        raise SystemExit(7)
    signal.signal(signal.SIGTERM, bye)
    open(sys.argv[1], "w").write("ready")
    while True:
        time.sleep(0.05)
""")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signals_stop_the_child_and_the_exit_code_is_the_childs(tmp_path, sig):
    """What killing `tripy-lab` must do: stop JupyterLab (with SIGTERM, its clean shutdown) and exit as it did."""
    marker = tmp_path / "marker"
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    wrapper = [sys.executable, "-c", "import sys; from tripy_lab.lab.cli.main import run_child; "
               f"raise SystemExit(run_child([sys.executable, {str(script)!r}, {str(marker)!r}]))"]
    env = {**os.environ, "PYTHONPATH": SRC}
    proc = subprocess.Popen(wrapper, env=env)
    for _ in range(200):
        if marker.exists() and marker.read_text() == "ready":
            break
        time.sleep(0.05)
    else:
        proc.kill()
        raise AssertionError("child never started")
    proc.send_signal(sig)
    assert proc.wait(20) == 7
    assert marker.read_text() == "SIGTERM"


def test_doctor_reports_each_part(monkeypatch, capsys):
    monkeypatch.setattr(doctor, "_extension", lambda: doctor.Check(doctor.OK, "lab extension", "stub"))
    assert doctor.main() == 0
    out = capsys.readouterr().out
    lines = {line[6:29].strip(): line[:5].strip() for line in out.splitlines() if line[:5].strip()}
    for name in ("python", "jupyterlab", "graphviz dot", "engine reference", "engine xla", "engine tensorrt",
                 "engine onnxruntime", "default engine", "jax devices", "tensorrt", "onnxruntime"):
        assert name in lines, (name, out)
    assert lines["engine reference"] == "ok" and lines["default engine"] == "ok"
    assert "max error" in out and "The default path works" in out


def test_doctor_fails_when_the_default_path_is_broken(monkeypatch, capsys):
    monkeypatch.setattr(doctor.shutil, "which", lambda name: None)  # no graphviz `dot`
    monkeypatch.setattr(doctor, "_extension", lambda: doctor.Check(doctor.OK, "lab extension", "stub"))
    monkeypatch.setattr(doctor, "_engine_checks", lambda: [doctor.Check(doctor.OK, "engine reference", "stub")])
    assert cli.main(["doctor"]) == 1
    out = capsys.readouterr().out
    assert "FAIL  graphviz dot" in out and "The default path is broken: graphviz dot." in out


MODEL = """
import tripy_lab as tp

def mlp(x, w):
    h = tp.relu(x @ w)
    return h * 2.0

def bad(x, w):
    return x @ w
"""


def test_explain_prints_every_stage(tmp_path, capsys):
    path = tmp_path / "model.py"
    path.write_text(MODEL)
    html_out = tmp_path / "mlp.html"
    assert cli.main(["explain", f"{path}:mlp", "--args", "x=f32[1:2:8,4] w=f32[4,3]", "--engine", "reference",
                     "--html", str(html_out)]) == 0
    out = capsys.readouterr().out.replace(f"wrote {html_out}\n", "")
    page = html_out.read_text()  # the same stages, as a self-contained report
    assert "tensorrt.matrix_multiply" in page and "model.py:5" in page and "<script" not in page
    assert "== Trace" in out and "matmul(x" in out and "model.py:5" in out
    assert "tensorrt.shape_profile<min = [1, 4], opt = [2, 4], max = [8, 4]>" in out
    assert "== Engine reference -O3" in out and "matrix_multiply" in out
    assert "mlp (model.py) compiled to Executable(x: Tensor, w: Tensor) -> Tensor" in out


def test_explain_errors_point_at_the_users_line(tmp_path, capsys):
    path = tmp_path / "model.py"
    path.write_text(MODEL)
    assert cli.main(["explain", f"{path}:bad", "--args", "x=f32[2,4] w=f32[3,3]"]) == 1
    err = capsys.readouterr().err
    assert "Incompatible shapes for matrix multiplication" in err and f"--> {path}:9 in bad()" in err
    assert cli.main(["explain", f"{path}:bad", "--args", "x=f32[2,4]"]) == 1
    assert "No spec for parameter: w." in capsys.readouterr().err
    with pytest.raises(SystemExit, match="defines no 'nope'"):
        cli.main(["explain", f"{path}:nope", "--args", "x=f32[2]"])


def test_report_of_a_missing_notebook_is_an_error(tmp_path, capsys):
    assert cli.main(["report", str(tmp_path / "none.ipynb"), "-o", str(tmp_path / "r.html")]) == 2
    assert "no notebook" in capsys.readouterr().err


def test_report_and_explain_html_call_the_lab_writers(tmp_path, capsys, monkeypatch):
    """The CLI's side: `report` calls tripy_lab.lab.report_notebook(ipynb, out), `explain --html` calls
    tripy_lab.lab.report(exe, out) (the writers themselves are tested with the static snapshots)."""
    import tripy_lab as tp
    from tripy_lab import lab

    calls = []
    monkeypatch.setattr(lab, "report_notebook", lambda nb, out: calls.append(("nb", nb, out)), raising=False)
    monkeypatch.setattr(lab, "report", lambda exe, out, **kw: calls.append(("exe", exe, out)), raising=False)
    nb = tmp_path / "n.ipynb"
    nb.write_text("{}")
    assert cli.main(["report", str(nb), "-o", str(tmp_path / "r.html")]) == 0
    assert cli.main(["report", str(nb)]) == 0  # default: next to the notebook
    path = tmp_path / "model.py"
    path.write_text(MODEL)
    assert cli.main(["explain", f"{path}:mlp", "--args", "x=f32[2,4] w=f32[4,3]", "--engine", "reference",
                     "--html", str(tmp_path / "e.html")]) == 0
    assert calls[:2] == [("nb", str(nb), str(tmp_path / "r.html")), ("nb", str(nb), str(tmp_path / "n.html"))]
    kind, exe, out = calls[2]
    assert kind == "exe" and isinstance(exe, tp.Executable) and out == str(tmp_path / "e.html")
    assert f"wrote {tmp_path / 'r.html'}" in capsys.readouterr().out

    def refuse(nb, out):
        raise tp.TripyException("The notebook holds no tripy-lab snapshots.", ["Run it and save it."])

    monkeypatch.setattr(lab, "report_notebook", refuse, raising=False)
    assert cli.main(["report", str(nb)]) == 1  # a message, not a traceback
    err = capsys.readouterr().err
    assert err.startswith("tripy-lab report: The notebook holds no tripy-lab snapshots.") and "Traceback" not in err


@pytest.mark.slow
def test_report_writes_a_notebooks_compiles_as_html(tmp_path, capsys):
    """`tripy-lab report` on a notebook executed in a real kernel: one HTML file with the cell's stages."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    cells = ["%load_ext tripy_lab\nimport tripy_lab as tp\ntp.config.engine = 'reference'",
             "%%tpcompile add_exe a=f32[1:2:3,4]\ndef add(a):\n    return tp.exp(a) + a\n"]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nbclient.NotebookClient(nb, timeout=120, kernel_name="python3").execute()
    path, out = tmp_path / "nb.ipynb", tmp_path / "nb.html"
    nbformat.write(nb, path)
    assert cli.main(["report", str(path), "-o", str(out)]) == 0
    page = out.read_text()
    assert "tensorrt.shape_profile" in page and "tensorrt.unary" in page and "In [2]:3" in page
    assert "<script" not in page and f"wrote {out}" in capsys.readouterr().out


def test_explain_json_gives_stages_timings_and_layers(tmp_path, capsys):
    import json

    path = tmp_path / "model.py"
    path.write_text(MODEL)
    assert cli.main(["explain", f"{path}:mlp", "--args", "x=f32[1:2:8,4] w=f32[4,3]", "--engine", "reference",
                     "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["engine"] == "reference" and data["optimization_level"] == 3
    assert data["signature"] == "Executable(x: Tensor, w: Tensor) -> Tensor"
    assert set(data["timings_ms"]) == {"trace", "mlir", "build"} and all(v >= 0 for v in data["timings_ms"].values())
    assert "matmul(x" in data["stages"]["trace"]["text"] and data["stages"]["trace"]["ops"] > 0
    assert "tensorrt.shape_profile<min = [1, 4], opt = [2, 4], max = [8, 4]>" in data["stages"]["mlir"]["text"]
    assert len(data["layers"]) == data["stages"]["engine"]["layers"] > 0
    assert any("matrix_multiply" in json.dumps(row) for row in data["layers"])
    (memory,) = data["memory"]  # the reference engine's one call at the opt shapes: numpy's nbytes
    assert memory["shape"].startswith("opt") and memory["parts"]["inputs"] == (2 * 4 + 4 * 3) * 4
    assert memory["total"] == sum(memory["parts"].values()) >= memory["parts"]["inputs"] + 2 * 3 * 4


def test_explain_json_reports_errors_as_json(tmp_path, capsys):
    import json

    path = tmp_path / "model.py"
    path.write_text(MODEL)
    assert cli.main(["explain", f"{path}:mlp", "--args", "x=f32[1:2:8,5] w=f32[4,3]", "--engine", "reference",
                     "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["error"]["summary"] and "model.py" in data["error"]["location"]
