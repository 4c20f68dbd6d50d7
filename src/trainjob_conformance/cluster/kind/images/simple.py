"""Single-binary images: controllers, control plane, etcd, CoreDNS, pause, and the test busybox.

None of them needs a distribution: they talk to the API server inside the
cluster (the service account's CA comes with the token), so FROM scratch plus
the binary is enough. Controllers run as the non-root user upstream's
distroless images use, since their Deployments may ask for runAsNonRoot.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from trainjob_conformance.cluster.kind.host_packages import require
from trainjob_conformance.cluster.kind.images.store import (
    add_file,
    build_from_context,
    fresh_context,
)
from trainjob_conformance.errors import ConformanceError

NONROOT = "65532:65532"


def scratch_dockerfile(entrypoint: str, user: str | None = None) -> str:
    lines = ["FROM scratch", "COPY rootfs/ /", "ENV PATH=/usr/local/bin:/usr/bin:/bin"]
    if user:
        lines.append(f"USER {user}")
    lines.append(f'ENTRYPOINT ["{entrypoint}"]')
    return "\n".join(lines) + "\n"


def build_binary_image(
    image: str, binary: Path, path_in_image: str, user: str | None = None
) -> None:
    """An image holding one static binary (plus an empty /tmp) and running it."""
    context = fresh_context(image)
    add_file(context, binary, "rootfs" + path_in_image)
    tmp = context / "rootfs" / "tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    tmp.chmod(0o1777)
    build_from_context(image, context, scratch_dockerfile(path_in_image, user))


# A pause container: sleeps until signalled and reaps orphans, as PID 1 of a
# sandbox must. Written here, compiled statically on the host.
PAUSE_C = r"""
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
static void stop(int sig) { (void)sig; _exit(0); }
static void reap(int sig) { (void)sig; while (waitpid(-1, NULL, WNOHANG) > 0) {} }
int main(void) {
  signal(SIGINT, stop);
  signal(SIGTERM, stop);
  signal(SIGCHLD, reap);
  for (;;) pause();
}
"""


def build_pause(image: str) -> None:
    require("gcc", "libc6-dev")
    cc = shutil.which("gcc") or shutil.which("cc")
    assert cc is not None
    context = fresh_context(image)
    source = context / "pause.c"
    source.write_text(PAUSE_C)
    out = context / "rootfs" / "pause"
    out.parent.mkdir(parents=True)
    result = subprocess.run(
        [cc, "-static", "-Os", "-o", str(out), str(source)], capture_output=True, text=True
    )
    if result.returncode != 0:
        raise ConformanceError(
            f"compiling the pause program failed (static libc: apt-get install libc6-dev): "
            f"{result.stderr.strip().splitlines()[-1:]}"
        )
    build_from_context(image, context, scratch_dockerfile("/pause", NONROOT))


BUSYBOX = Path("/bin/busybox")


def busybox_version() -> str:
    """The installed busybox-static package's version (the cache key of the image)."""
    require("busybox-static")
    version = subprocess.run(
        ["dpkg-query", "-W", "-f=${Version}", "busybox-static"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return version.stdout.strip()


def build_busybox(image: str) -> None:
    """Debian's static busybox with a link per applet (sh, grep, sleep, ...)."""
    context = fresh_context(image)
    rootfs = context / "rootfs"
    add_file(context, BUSYBOX, "rootfs/bin/busybox")
    applets = subprocess.run(
        [str(BUSYBOX), "--list"], capture_output=True, text=True, check=True
    ).stdout.split()
    for applet in applets:
        link = rootfs / "bin" / applet
        if not link.exists():
            link.symlink_to("busybox")
    for directory in ("tmp", "etc"):
        (rootfs / directory).mkdir(exist_ok=True)
    (rootfs / "tmp").chmod(0o1777)
    dockerfile = 'FROM scratch\nCOPY rootfs/ /\nENV PATH=/bin\nCMD ["sh"]\n'
    build_from_context(image, context, dockerfile)
