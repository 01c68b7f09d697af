"""pytest setup for tools/reference/tests.

Tests marked `reference` need the heavy reference stack (torch, transformers 5.x, nvidia-modelopt,
auto-round: requirements-reference.txt). They are deselected (reported as "deselected") unless a
marker expression is given, so the default run (scripts/test.sh, CI) stays torch-free:
    pytest tools/reference/tests                 # torch-free checks only
    pytest tools/reference/tests -m reference    # only the reference-stack checks
    pytest tools/reference/tests -m "reference or not reference"   # everything
"""
import os
import sys

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..")))


def pytest_configure(config):
    config.addinivalue_line("markers", "reference: needs torch/transformers/modelopt/auto-round "
                                       "(requirements-reference.txt); select with -m reference")


def pytest_collection_modifyitems(config, items):
    if config.option.markexpr:
        return
    keep, drop = [], []
    for item in items:
        (drop if item.get_closest_marker("reference") else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
