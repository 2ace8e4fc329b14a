"""Each import path that moved still works for one minor version, and says where it went: it
warns (``DeprecationWarning``) naming the new path, and gives the moved module's own objects.
The package and its tests import only the new paths (pyproject's ``filterwarnings`` turns a
deprecation warning raised from payhooks' own code or its tests into an error)."""

from __future__ import annotations

import gc
import importlib
import sys
import warnings

import pytest

import payhooks
from tests.unit.test_layout import MOVED

ASYNC = ["claims", "hooks", "deliveries", "reconcile"]
GATEWAYS = ["razorpay", "cashfree", "payu", "phonepe", "juspay", "_common"]
PATHS = [
    *[(f"payhooks.{name}", f"payhooks.{room}.{name}") for room, name in MOVED if name != "ingest"],
    *[(f"payhooks.fastapi.{name}", f"payhooks.aio.{name}") for name in ASYNC],
    *[(f"payhooks.providers.{name}", f"payhooks.gateways.{name}") for name in GATEWAYS],
]


@pytest.mark.parametrize(("old", "new"), PATHS)
def test_an_old_module_path_warns_naming_the_new_one_and_is_the_moved_module(
    old: str, new: str
) -> None:
    moved = importlib.import_module(new)
    with warnings.catch_warnings():  # the old package around it warns of itself (below)
        warnings.simplefilter("ignore", DeprecationWarning)
        importlib.import_module(old.rpartition(".")[0])
    saved = sys.modules.pop(old, None)
    try:
        with pytest.warns(DeprecationWarning, match=rf"^{old} is deprecated .*: import {new}$"):
            found = importlib.import_module(old)
        assert found is moved
        assert sys.modules[old] is moved
    finally:
        if saved is not None:
            sys.modules[old] = saved


def test_the_old_adapters_package_warns_and_gives_the_gateways_objects() -> None:
    saved = sys.modules.pop("payhooks.providers", None)
    try:
        with pytest.warns(DeprecationWarning, match=r"import payhooks\.gateways$"):
            old = importlib.import_module("payhooks.providers")
    finally:
        if saved is not None:
            sys.modules["payhooks.providers"] = saved
    new = importlib.import_module("payhooks.gateways")
    assert old.__all__ and all(getattr(old, each) is getattr(new, each) for each in old.__all__)


def test_a_name_read_through_the_old_ingest_path_warns_and_is_the_moved_modules() -> None:
    moved = importlib.import_module("payhooks.intake.ingest")
    with pytest.warns(DeprecationWarning, match=r"import payhooks\.intake\.ingest$"):
        from payhooks.ingest import Receipt, replay
    assert Receipt is moved.Receipt
    assert replay is moved.replay


def test_importing_payhooks_warns_of_nothing() -> None:
    """``import payhooks`` loads the old ingest path's shim (so ``payhooks.ingest`` stays the
    function), and that alone must not warn."""
    names = [name for name in sys.modules if name == "payhooks" or name.startswith("payhooks.")]
    saved = {name: sys.modules.pop(name) for name in names}
    gc.collect()  # an earlier test's unclosed socket is not warned of during the import
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            fresh = importlib.import_module("payhooks")
        said = [each for each in caught if not issubclass(each.category, ResourceWarning)]
        assert [str(each.message) for each in said] == []
        assert callable(fresh.ingest)
    finally:
        for name in [n for n in sys.modules if n == "payhooks" or n.startswith("payhooks.")]:
            del sys.modules[name]
        sys.modules.update(saved)


def test_the_exported_ingest_is_the_function_after_its_old_module_path_is_imported() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        importlib.import_module("payhooks.ingest")
    assert callable(payhooks.ingest)


def test_a_deprecation_raised_where_a_test_imports_an_old_path_fails_the_suite() -> None:
    """pyproject's filterwarnings makes the warning an error where payhooks' code or a test
    module is the one importing an old path."""
    saved = sys.modules.pop("payhooks.db", None)
    try:
        with pytest.raises(DeprecationWarning, match=r"import payhooks\.plumbing\.db$"):
            import payhooks.db  # noqa: F401
    finally:
        sys.modules.pop("payhooks.db", None)
        if saved is not None:
            sys.modules["payhooks.db"] = saved
