"""The reference app uses only the ``svc`` SDK and HTTP: walking every module's imports,
none is one of the service's own packages."""

from __future__ import annotations

import ast
from pathlib import Path

import examples.reference_app

SERVER_PACKAGES = {"payments", "router", "portal", "manifest", "ops", "tests"}
PACKAGE = Path(examples.reference_app.__file__).parent


def imported_roots(path: Path) -> set[str]:
    roots: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
        elif isinstance(node, ast.ImportFrom):
            raise AssertionError(f"{path.name}: relative imports hide what is imported")
    return roots


def test_the_app_imports_no_server_package() -> None:
    modules = sorted(PACKAGE.rglob("*.py"))
    assert len(modules) >= 10  # the walk really found the package
    for path in modules:
        found = imported_roots(path) & SERVER_PACKAGES
        assert not found, f"{path.relative_to(PACKAGE)} imports {sorted(found)}"


def test_the_walk_catches_a_server_import(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("from payments.ledger import views\nimport router.app\n")
    assert imported_roots(bad) & SERVER_PACKAGES == {"payments", "router"}
