"""Fork: importing before fork is harmless; using the library before fork makes the child fail clearly."""

from __future__ import annotations

import subprocess
import sys
import textwrap

CHILD_USES_LIBRARY = textwrap.dedent(
    """
    import asyncio, os, sys
    import prosody
    {parent_use}
    pid = os.fork()
    if pid == 0:
        async def child() -> str:
            try:
                c = prosody.ProsodyClient(bootstrap_servers="mock:9092", mock=True, probe_port=None,
                                          source_system="child")
                await c.send("fork-topic", "k", {{"n": 1}})
                return "child-ok"
            except RuntimeError as e:
                return "child-error: " + str(e)
        print(asyncio.run(child()), flush=True)
        {child_old_client}
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    print("exit", os.waitstatus_to_exitcode(status), flush=True)
    """
)

PARENT_USE = (
    "parent = prosody.ProsodyClient(bootstrap_servers='mock:9092', mock=True, probe_port=None)\n"
    "assert parent.source_system == ''"
)

OLD_CLIENT = (
    "try:\n"
    "        parent.source_system\n"
    "    except RuntimeError as e:\n"
    "        print('old-client: ' + str(e), flush=True)\n"
    "    del parent  # collecting it in the child must not enter the Go runtime"
)


def run(code: str) -> list[str]:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()


def test_fork_after_import_leaves_the_child_free_to_use_the_library() -> None:
    lines = run(CHILD_USES_LIBRARY.format(parent_use="", child_old_client=""))
    assert lines == ["child-ok", "exit 0"]


def test_fork_after_use_gives_a_clear_error_in_the_child_without_hanging() -> None:
    lines = run(CHILD_USES_LIBRARY.format(parent_use=PARENT_USE, child_old_client=OLD_CLIENT))
    assert lines[0].startswith("child-error: ") and "after fork" in lines[0]
    assert lines[1] == "old-client: ProsodyClient cannot be used after fork. Create a new client in the child process."
    assert lines[2] == "exit 0"
