"""Import audit for the orchestration tests: on PYTHONPATH, in every process of a flow run.

In a DVC stage command (DVC sets `DVC_STAGE`) with `SLCA_IMPORT_AUDIT` naming a file, it appends
one JSON line at exit: the stage item and every file of the `slca` package the command imported or
opened (modules, templates), as `src/slca/...` paths. Other processes are left alone.
"""

import atexit
import json
import os
import sys

_OUT, _STAGE = os.environ.get("SLCA_IMPORT_AUDIT"), os.environ.get("DVC_STAGE")

if _OUT and _STAGE:
    _opened = set()

    def _hook(event, args):
        if event == "open" and args and isinstance(args[0], str) and os.sep + "slca" + os.sep in args[0]:
            _opened.add(os.path.abspath(args[0]))

    def _dump():
        package = sys.modules.get("slca")
        if package is None:
            return
        src = os.path.dirname(os.path.dirname(os.path.abspath(package.__file__)))
        files = {
            getattr(module, "__file__", None)
            for name, module in list(sys.modules.items())
            if name == "slca" or name.startswith("slca.")
        } | _opened
        used = sorted(
            "src/" + os.path.relpath(path, src).replace(os.sep, "/")
            for path in files
            if path and os.path.abspath(path).startswith(src + os.sep) and not path.endswith(".pyc")
        )
        with open(_OUT, "a", encoding="utf-8") as handle:
            handle.write(json.dumps({"stage": _STAGE, "files": used}) + "\n")

    sys.addaudithook(_hook)
    atexit.register(_dump)
