# shellcheck shell=bash
# A small shared filesystem for the fault tests (a checkpoint directory that fills up): a
# 16 MiB tmpfs at $SMALL_FS, mounted before the nodes start so that the node containers'
# bind mount of the path holds it (native nodes see it directly). A test fills it to ENOSPC
# and empties it again; `down` unmounts it.

SMALL_FS=/var/cache/hpclaunch-cluster/small-fs

mount_small_fs() {
  mkdir -p "$SMALL_FS"
  mountpoint -q "$SMALL_FS" || mount -t tmpfs -o size=16m,mode=1777 hpclaunch-small-fs "$SMALL_FS" ||
    die "cannot mount a tmpfs at $SMALL_FS"
}

unmount_small_fs() {
  ! mountpoint -q "$SMALL_FS" || umount "$SMALL_FS" || log "could not unmount $SMALL_FS (in use?)"
}
