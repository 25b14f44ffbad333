/*
 * log.h - one logging path for every layer.  It lives in util/, below the
 * stores, so that s3/, engine/, fs/ and tools/ can all include it without
 * seeing each other's headers.  (LevelDB hangs its Logger on the Env, the
 * storage seam; memwalfs has one process-wide log, so it needs no handle
 * and sits beside the other shared helpers: coding.h, thread.h.)
 *
 * Log where an error starts, with the operation, the object key and the
 * errno or HTTP status.  Never log secrets.  Lines go to stderr (or syslog
 * once the mount has daemonised) as "memwalfs: LEVEL: message"; at the debug
 * level (MEMWALFS_LOG=debug, mount -vv) as "memwalfs: LEVEL file:line:
 * message": source locations are for developers, not for users.
 * Thread-safe; the level is read without a lock.
 */
#ifndef MEMWALFS_LOG_H
#define MEMWALFS_LOG_H

#include <stdbool.h>

enum mw_log_level { MW_LOG_ERR = 0, MW_LOG_WARN, MW_LOG_INFO, MW_LOG_DEBUG };

/* Emit one line if level <= the current level. */
void mw_log(enum mw_log_level level, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Set the level (default MW_LOG_WARN, or MEMWALFS_LOG=err|warn|info|debug). */
void mw_log_set_level(enum mw_log_level level);
enum mw_log_level mw_log_get_level(void);
/* Send lines to syslog instead of stderr (after daemonising). */
void mw_log_to_syslog(bool on);

/*
 * One line per error for users: a command that calls a library (opening a
 * store, an engine) brackets the call with mw_log_capture_begin() and
 * mw_log_capture_end().  Error lines logged by this thread in between are
 * not printed (unless the level is debug); the first one is kept and
 * returned by _end ("" if none: the command then says strerror), so the
 * command prints one line: what it was doing and why it failed.  Warnings
 * are printed as usual.  The returned string is this thread's, valid until
 * its next mw_log_capture_begin().
 */
void mw_log_capture_begin(void);
const char *mw_log_capture_end(void);

#define log_err(...) mw_log(MW_LOG_ERR, __FILE__, __LINE__, __VA_ARGS__)
#define log_warn(...) mw_log(MW_LOG_WARN, __FILE__, __LINE__, __VA_ARGS__)
#define log_info(...) mw_log(MW_LOG_INFO, __FILE__, __LINE__, __VA_ARGS__)
#define log_debug(...) mw_log(MW_LOG_DEBUG, __FILE__, __LINE__, __VA_ARGS__)

#endif /* MEMWALFS_LOG_H */
