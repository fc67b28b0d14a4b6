"""A thread left in a native call when the interpreter exits: the process ends normally. Before
Python 3.14 such a thread, taking the GIL back while the interpreter finalized, was ended with
pthread_exit, whose unwind through the GIL guard's destructor called std::terminate: "terminate
called without an active exception", and the process aborted (a script that exits mid-read, a
kernel shut down while the wizard profiled)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

EXITS_MID_READ = textwrap.dedent(
    """
    import socket, threading, time
    from native_loader import Credentials, ReaderConfig, S3Reader

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()  # takes the connection and never answers: the read waits
    reader = S3Reader(
        ReaderConfig(endpoint_url=f"http://127.0.0.1:{server.getsockname()[1]}"),
        credentials=Credentials("key", "secret"),
    )

    def read():
        try:
            reader.read("s3://bucket/key")
        except Exception:
            pass

    threading.Thread(target=read, daemon=True).start()

    class SlowExit:
        def __del__(self):
            time.sleep(2)

    # torn down while the interpreter finalizes: the reading thread's wait ends meanwhile
    slow = SlowExit()
    time.sleep(0.5)
    print("exiting", flush=True)
    """
)


def test_a_thread_mid_read_at_exit_leaves_the_process_ending_normally() -> None:
    done = subprocess.run(
        [sys.executable, "-c", EXITS_MID_READ], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert done.stdout.strip() == "exiting" and "terminate called" not in done.stderr
