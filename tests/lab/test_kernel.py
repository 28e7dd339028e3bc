"""In a real ipykernel (nbclient, no browser): short TripyException reports, the kernel keeps working,
widgets are displayed and the Executable lands in the namespace."""

import os

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")


def run(cells: list[str]):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    client = nbclient.NotebookClient(nb, timeout=120, kernel_name="python3", allow_errors=True,
                                     store_widget_state=True)
    os.environ.setdefault("TRIPY_LAB_ENGINE", "reference")  # inherited by the kernel
    client.execute()
    return nb


def test_errors_are_short_and_the_kernel_survives():
    nb = run([
        "%load_ext tripy_lab",
        "%%tpcompile bad a=f32[1:3:2,4]\ndef bad(a):\n    return a\n",
        "%%tpcompile mm_exe a=f32[2,3] b=f32[4,5] --no-widgets\ndef mm(a, b):\n    return a @ b\n",
        "%%tpcompile ok_exe a=f32[1:2:3,4]\ndef ok(a):\n    return a + a\n",
        "print(ok_exe)",
    ])
    spec_err = nb.cells[1].outputs[0]
    assert spec_err["output_type"] == "error" and spec_err["ename"] == "SpecError"
    text = "\n".join(spec_err["traceback"])
    assert "%%tpcompile bad a=f32[1:3:2,4]" in text and "^^^^^" in text
    assert "interactiveshell" not in text and len(spec_err["traceback"]) == 1
    user_err = nb.cells[2].outputs[0]
    text = "\n".join(user_err["traceback"])
    assert "Incompatible shapes for matrix multiplication" in text and "return a @ b" in text
    assert "pipeline" not in text
    widget = nb.cells[3].outputs[0]
    assert "application/vnd.jupyter.widget-view+json" in widget["data"]
    assert nb.cells[4].outputs[0]["text"].strip() == "Executable(a: Tensor) -> Tensor"
    state = nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    htmls = [m["state"].get("value", "") for m in state.values() if m["model_name"] == "HTMLModel"]
    assert any("tensorrt.shape_profile" in h for h in htmls)
