"""Every benchmark script imports, with torch (they run only on the GPU machine, where a slip
such as an import cycle between them would cost device time). Skipped where torch is not
installed; ctest's bench-scripts-compile checks their syntax there."""
import importlib
import pathlib

import pytest

pytest.importorskip("torch")
BENCH = pathlib.Path(__file__).resolve().parents[2] / "bench"


@pytest.mark.parametrize("script", sorted(path.stem for path in BENCH.glob("*.py")))
def test_imports(script, monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))
    importlib.import_module(script)
