"""The sandbox's "grad" request (through Im2colConv2dFunction.apply, the course's differentiable path)
and the "stub" field of not_implemented replies."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tinytorch.milestone07.boundary import open_sandbox as Sandbox
from tinytorch.milestone07.references import ref_conv2d_grads
from tinytorch.release import write_student_edition

COURSE = Path(__file__).parent / "course" / "course_module.py"


def conv_request(with_bias: bool = True) -> tuple[dict, list, np.ndarray]:
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 2, 5, 6)).astype(np.float32)
    w = rng.standard_normal((3, 2, 3, 3)).astype(np.float32)
    b = rng.standard_normal(3).astype(np.float32) if with_bias else None
    g = rng.standard_normal((2, 3, 3, 3)).astype(np.float32)  # stride 2, padding 1 -> 3x3
    req = {"fn": "Im2colConv2dFunction.apply", "args": [x, w, b],
           "kwargs": {"stride": 2, "padding": 1},
           "audit": False, "grad": g}  # fmt: skip
    return req, [x, w, b], g


def test_grad_request_returns_each_arguments_gradient() -> None:
    req, (x, w, _b), g = conv_request()
    with Sandbox("tinytorch.perf.acceleration") as box:
        reply = box.request(req, 30.0)
    assert reply["status"] == "ok", reply
    grads = reply["grads"]
    assert len(grads) == 3
    for got, ref in zip(grads, ref_conv2d_grads(x, w, True, g, 2, 1), strict=True):
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


def test_grad_request_without_bias_gives_none_for_it() -> None:
    req, _, _ = conv_request(with_bias=False)
    with Sandbox(str(COURSE)) as box:
        reply = box.request(req, 30.0)
    assert reply["status"] == "ok", reply
    assert reply["grads"][2] is None and reply["grads"][0].shape == (2, 2, 5, 6)


def test_a_backward_stub_is_not_implemented_in_the_backward_phase(tmp_path) -> None:
    marker = "    def backward(self, grad_output):\n"
    path = tmp_path / "stub.py"
    path.write_text(
        COURSE.read_text().replace(marker, marker + "        raise NotImplementedError\n")
    )
    req, _, _ = conv_request()
    with Sandbox(str(path)) as box:
        reply = box.request(req, 30.0)
        plain = box.request({**req, "grad": None}, 30.0)
    assert reply["status"] == "not_implemented", reply
    assert reply["phase"] == "backward"
    assert reply["stub"] == "Im2colConv2dFunction.backward"
    assert plain["status"] == "ok"  # without "grad", backward never runs


def test_every_not_implemented_reply_names_its_stub(tmp_path) -> None:
    path = write_student_edition(17, tmp_path)
    x = np.ones((1, 1, 4, 4), np.float32)
    with Sandbox(str(path)) as box:
        im2col = box.request({"fn": "im2col", "args": [x, 2], "kwargs": {}}, 30.0)
        conv = box.request(
            {"fn": "im2col_conv2d", "args": [x, np.ones((1, 1, 2, 2), np.float32)], "kwargs": {}},
            30.0,
        )
    assert (im2col["status"], im2col["stub"], im2col["phase"]) == (
        "not_implemented", "im2col", "forward"
    )  # fmt: skip
    assert conv["stub"] == "im2col_conv2d"
