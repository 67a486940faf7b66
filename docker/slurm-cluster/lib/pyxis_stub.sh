# shellcheck shell=bash
# The pyxis stand-in (pyxis-stub/pyxis_stub.c): a SPANK plugin with pyxis' srun options,
# built against this Slurm's spank.h into /etc/slurm/spank/ (the node containers mount
# /etc/slurm) and listed in /etc/slurm/plugstack.conf, which srun (login node) and slurmd
# (nodes) read. `optional`: a missing plugin never stops a job.

PYXIS_STUB_DIR=/etc/slurm/spank

install_pyxis_stub() {
  local include=$SLURM_PREFIX/include
  from_source || apt_install libslurm-dev
  apt_install gcc libc6-dev
  mkdir -p "$PYXIS_STUB_DIR"
  gcc -shared -fPIC -Wall -Wextra -O2 -I"$include" -o "$PYXIS_STUB_DIR/pyxis_stub.so" \
    "$HERE/pyxis-stub/pyxis_stub.c" || die "building the pyxis stub failed"
  echo "optional $PYXIS_STUB_DIR/pyxis_stub.so" >/etc/slurm/plugstack.conf
}

remove_pyxis_stub() {
  rm -f /etc/slurm/plugstack.conf "$PYXIS_STUB_DIR/pyxis_stub.so"
  rmdir "$PYXIS_STUB_DIR" 2>/dev/null || true
}
