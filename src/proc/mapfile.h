/* mapfile.h - the file behind a process's mapping, opened for reading: the
 * one way native unwinding (core/native.c, for BPF) and dump's walker
 * (core/nwalk.c) reach what a process maps. */
#ifndef TAIPAN_MAPFILE_H
#define TAIPAN_MAPFILE_H

#include <stdbool.h>
#include <sys/types.h>

#include "proc/procmaps.h"

/* The most bytes of a vDSO image copied out. */
#define MAPFILE_VDSO_MAX (1 << 20)

/* Whether me is the vDSO, which no file holds. */
bool mapfile_is_vdso(const struct map_entry *me);

/* Opens what mapping me of pid maps, for reading (safe_open(): a regular
 * file only): through /proc/PID/map_files, which reaches the very file in
 * another mount namespace or after it was deleted; else the path inside the
 * process's root, resolved there, if what opens is still the mapped file
 * (device and inode). The vDSO is copied out of the process into a memfd.
 * Returns the descriptor or a negative errno. */
int mapfile_open(pid_t pid, const struct map_entry *me);

#endif /* TAIPAN_MAPFILE_H */
