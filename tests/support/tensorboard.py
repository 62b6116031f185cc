"""The real TensorBoard on loopback, for the summary tests: started on a
logdir on 127.0.0.1 (a port it picks), without TensorFlow in its process (as
a user's venv without TF runs it), every start bounded in time, always
stopped (its process group: TensorBoard's data server included).

``with tensorboard(logdir) as tb:`` yields a :class:`TensorBoard` whose
``get(path)``/``post(path, body)`` call its HTTP data API (``/data/...``) and
``wait_for(fn)`` polls until TensorBoard has loaded what ``fn`` looks for.
"""
from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any, Callable, Iterator

START_TIMEOUT = 90.0
LOAD_TIMEOUT = 60.0

# Put first on the child's sys.path: `import tensorflow` fails there, so
# TensorBoard runs with its reduced feature set, as without TensorFlow.
_NO_TENSORFLOW = """
import importlib.abc, sys
class _NoTensorFlow(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "tensorflow":
            raise ImportError("tensorflow is hidden from this TensorBoard")
sys.meta_path.insert(0, _NoTensorFlow())
"""


class TensorBoard:
    def __init__(self, url: str, process: subprocess.Popen, output: list[str]):
        self.url, self.process, self.output = url, process, output

    def get(self, path: str, **query: Any) -> Any:
        """GET ``path`` (with ``query``): parsed JSON, or bytes for anything else."""
        return self._open(urllib.request.Request(self._address(path, query)))

    def post(self, path: str, body: dict) -> Any:
        request = urllib.request.Request(self._address(path, {}), data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"}, method="POST")
        return self._open(request)

    def wait_for(self, check: Callable[[], Any], timeout: float = LOAD_TIMEOUT) -> Any:
        """Poll ``check()`` until it returns something true (TensorBoard loads
        event files in the background); fail with TensorBoard's output after ``timeout``."""
        deadline = time.monotonic() + timeout
        last: Any = None
        while time.monotonic() < deadline:
            try:
                last = check()
            except (OSError, KeyError, IndexError, ValueError) as exc:
                last = exc
            if last and not isinstance(last, Exception):
                return last
            time.sleep(0.25)
        raise AssertionError(f"TensorBoard did not show it within {timeout:g} s (last: {last!r}); "
                             f"its output:\n" + "".join(self.output[-40:]))

    def _address(self, path: str, query: dict) -> str:
        return self.url.rstrip("/") + path + ("?" + urllib.parse.urlencode(query) if query else "")

    @staticmethod
    def _open(request: urllib.request.Request) -> Any:
        with urllib.request.urlopen(request, timeout=30) as response:
            data = response.read()
            if response.headers.get_content_type() == "application/json":
                return json.loads(data)
            return data


@contextlib.contextmanager
def tensorboard(logdir: Path) -> Iterator[TensorBoard]:
    with tempfile.TemporaryDirectory(prefix="tb-no-tf-") as hide:
        Path(hide, "sitecustomize.py").write_text(_NO_TENSORFLOW)
        env = dict(os.environ, PYTHONPATH=hide, TF_CPP_MIN_LOG_LEVEL="2")
        process = subprocess.Popen(
            [sys.executable, "-m", "tensorboard.main", "--logdir", str(logdir), "--host", "127.0.0.1",
             "--port", "0", "--reload_interval", "1"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, start_new_session=True)
        output: list[str] = []
        lines: "queue.Queue[str]" = queue.Queue()

        def read() -> None:
            for line in process.stdout:
                output.append(line)
                lines.put(line)
        threading.Thread(target=read, daemon=True).start()
        try:
            deadline = time.monotonic() + START_TIMEOUT
            url = None
            while url is None:
                left = deadline - time.monotonic()
                if left <= 0 or process.poll() is not None:
                    raise AssertionError(f"TensorBoard did not start within {START_TIMEOUT:g} s "
                                         f"(exit {process.poll()}):\n" + "".join(output))
                with contextlib.suppress(queue.Empty):
                    found = re.search(r"TensorBoard \S+ at (http://127\.0\.0\.1:\d+/)", lines.get(timeout=left))
                    url = found and found.group(1)
            yield TensorBoard(url, process, output)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)
