"""User functions: imported from the pipeline's own folder, also by many thread workers at once."""

import threading

from seqline.pipeline.functions import load_function

MODULE = ("import time\n"
          "time.sleep(0.01)  # a slow import widens the window\n"
          "def which():\n"
          "    return {!r}\n")


def test_threads_loading_one_module_from_two_folders_each_get_their_own(tmp_path):
    """Thread workers import the same module at once, while a same-named module from another
    pipeline's folder is loaded: every thread gets the module of its own folder, none fails."""
    folders = {}
    for name in ("first", "second"):
        folders[name] = tmp_path / name
        folders[name].mkdir()
        (folders[name] / "threaded_fns.py").write_text(MODULE.format(name))
    errors: list[BaseException] = []

    def load(name: str) -> None:
        try:
            assert load_function("threaded_fns:which", str(folders[name]))() == name
        except BaseException as exc:  # noqa: BLE001 - collected and asserted below
            errors.append(exc)

    for round_ in range(12):
        load_function.cache_clear()
        name = ("first", "second")[round_ % 2]
        threads = [threading.Thread(target=load, args=(name,)) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert errors == []
