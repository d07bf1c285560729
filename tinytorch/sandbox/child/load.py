"""Finding and importing the student's Module 17: a module name, a .py file, or a notebook.

A .ipynb or a jupytext percent .py with nbdev `#| export` markers is graded by its exported cells
only (see `exports.py`); the other cells never run.

Runs inside the child process (student code is untrusted); the parent only sees `LoadInfo`.
"""

from __future__ import annotations
import __future__

import functools
import importlib
import importlib.util
import inspect
import linecache
import operator
import os
import sys
import traceback
import types
from collections.abc import Sequence
from types import ModuleType
from typing import Any

from tinytorch.sandbox.child import exports

FUTURE_FLAGS = functools.reduce(
    operator.or_, (getattr(__future__, f).compiler_flag for f in __future__.all_feature_names)
)
MODULE_FILE = "acceleration.py"  # the course's Module 17 file: a folder holding it is a submission


def is_path(impl: str) -> bool:
    """A path (has a separator or ends in .py/.ipynb) rather than a dotted module name."""
    return impl.endswith((".py", ".ipynb")) or os.sep in impl or "/" in impl


def describe(impl: str) -> str:
    return os.path.abspath(impl) if is_path(impl) else impl


def import_impl(impl: str) -> ModuleType:
    """Import the module; raises ModuleNotFoundError when it does not exist."""
    if not is_path(impl):
        return importlib.import_module(impl)
    path = os.path.abspath(impl)
    if not os.path.isfile(path):
        raise ModuleNotFoundError(f"no such file: {path}", name=path)
    name = "_m07_student_" + os.path.splitext(os.path.basename(path))[0]
    sys.path.insert(0, os.path.dirname(path))  # so the file can import its siblings
    if exports.is_notebook_like(path):  # only the exported cells become the module
        module = ModuleType(name)
        module.__file__ = path
        sys.modules[name] = module
        flags = 0  # a cell's `from __future__ import` holds for the cells after it
        for filename, source in exports.code_units(path):
            code = compile(source, filename, "exec", flags=flags, dont_inherit=True)
            flags |= code.co_flags & FUTURE_FLAGS
            if filename != path:  # a notebook's cell: tracebacks read its lines from here
                linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
            exec(code, module.__dict__)  # noqa: S102
        return module
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ModuleNotFoundError(f"cannot import {path} as a Python module", name=path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def load_impl(
    impl: str, names: Sequence[str] = (), classes: Sequence[str] = ()
) -> tuple[ModuleType | None, dict[str, Any]]:
    """(module or None, info) with info = {"status": "ok" | "not_found" | "import_error" |
    "not_implemented", "error": str, "functions": {name: "ok" | "missing" | "not callable"} for
    each of `names` and `classes` (a class must be a class with an `apply`),
    "stubs": [places of the graded source that still raise NotImplementedError],
    "conv_methods": [those stubs that are methods of the graded classes, or of a class
    im2col_conv2d uses]}."""
    info: dict[str, Any] = {"status": "ok", "error": "", "functions": {}, "file": ""}
    try:
        module = import_impl(impl)
    except ModuleNotFoundError as exc:
        # Not found only when the impl itself (its file, or it or its package) is absent; a
        # ModuleNotFoundError for anything else is the student's own import failing.
        missing = exc.name or ""
        if is_path(impl):
            own = missing == describe(impl)
        else:
            own = bool(missing) and (impl == missing or impl.startswith(missing + "."))
        if own:
            info.update(status="not_found", error=f"{exc}")
        else:
            info.update(status="import_error", error=_format(exc))
        return None, info
    except NotImplementedError as exc:
        info.update(status="not_implemented", error=_format(exc))
        return None, info
    except BaseException as exc:  # noqa: BLE001 (untrusted: SyntaxError, SystemExit, ...)
        info.update(status="import_error", error=_format(exc))
        return None, info
    info["file"] = getattr(module, "__file__", "") or ""
    info["stubs"] = _stubs(info["file"])
    uses = conv_methods(module, info["file"], classes)
    info["conv_methods"] = [place for place in info["stubs"] if place in uses]
    for name in names:
        fn = getattr(module, name, None)
        info["functions"][name] = (
            "missing" if fn is None else "ok" if callable(fn) else "not callable"
        )
    for name in classes:  # a graded Function class: a class whose apply can be called
        try:
            cls = getattr(module, name, None)
            info["functions"][name] = (
                "missing" if cls is None
                else "ok" if isinstance(cls, type) and callable(getattr(cls, "apply", None))
                else "not a Function class with apply"
            )  # fmt: skip
        except Exception:  # noqa: BLE001 (a student's class may do anything on attribute access)
            info["functions"][name] = "not a Function class with apply"
    return module, info


def _stubs(file: str) -> list[str]:
    """The places ("im2col", "Class.method") of the graded source that are still stubs."""
    if not file.endswith((".py", ".ipynb")) or not os.path.isfile(file):
        return []
    try:
        return exports.stub_places(exports.exported_source(file))
    except (OSError, ImportError):
        return []


def conv_methods(module: ModuleType, file: str, classes: Sequence[str] = ()) -> list[str]:
    """Qualnames ("Im2colConv2dFunction.backward", "Base.forward") of the methods, written in the
    student's file, that the classes im2col_conv2d uses resolve to: its Function, whatever its name.

    The classes are those im2col_conv2d names, directly or through the student's own helpers it
    calls. A method counts as the class resolves it (a base's stub that the class overrides does
    not). Facts for the grader, which decides what is graded (part_a.graded_places).
    """
    if not file:
        return []
    try:
        return sorted(_conv_methods(module, os.path.realpath(file), classes))
    except Exception:  # noqa: BLE001 (the student's classes may do anything on attribute access)
        return []


def _conv_methods(module: ModuleType, file: str, graded: Sequence[str]) -> set[str]:
    def own(code: Any) -> bool:
        return isinstance(code, types.CodeType) and exports.compiled_in(code, file)

    fn = getattr(module, "im2col_conv2d", None)
    classes = [fn.__self__] if isinstance(getattr(fn, "__self__", None), type) else []
    for name in graded:  # the graded classes, used by im2col_conv2d or not
        cls = getattr(module, name, None)
        classes += [cls] if isinstance(cls, type) else []
    fn = getattr(fn, "__func__", fn)  # `im2col_conv2d = ConvFunction.apply`: the class is __self__
    code = getattr(fn, "__code__", None)
    scope = getattr(fn, "__globals__", None) or vars(module)
    todo, seen = ([code] if own(code) else []), set()
    while todo and len(seen) < 256:
        code = todo.pop()
        if code in seen:
            continue
        seen.add(code)
        todo += [c for c in code.co_consts if isinstance(c, types.CodeType)]  # nested defs
        for name in code.co_names:
            obj = scope.get(name)
            if isinstance(obj, type):
                classes.append(obj)
            elif own(getattr(obj, "__code__", None)):  # a helper of the student's it calls
                todo.append(obj.__code__)
    places = set()
    for cls in classes:
        for name in dir(cls):
            attr = inspect.getattr_static(cls, name)
            attr = getattr(attr, "__func__", attr)  # a staticmethod or classmethod
            if own(getattr(attr, "__code__", None)):
                places.add(attr.__qualname__)
    return places


_SANDBOX = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # tinytorch/sandbox


def _format(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    where = ""
    for frame in reversed(frames):  # the student's frame: never ours (exports.py:173)
        mine = os.path.abspath(frame.filename).startswith(_SANDBOX + os.sep)
        if "importlib" not in frame.filename and "milestone07" not in frame.filename and not mine:
            where = f" (at {os.path.basename(frame.filename)}:{frame.lineno})"
            break
    if isinstance(exc, SyntaxError) and exc.lineno:
        where = f" (at {os.path.basename(exc.filename or '?')}:{exc.lineno})"
    return f"{type(exc).__name__}: {exc}{where}"
