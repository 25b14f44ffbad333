/*
 * json.h - a small, strict JSON reader for the credential documents of the
 * AWS credential chain (credential_process output, container and instance
 * metadata answers): one object whose members of interest are strings.
 *
 * json_walk_object() validates the whole document (RFC 8259: one value,
 * nothing but white space after it, strings with their escapes, numbers,
 * true/false/null, nesting up to 16) and calls back for each member of the
 * top-level object whose value is a string, a number or a literal; nested
 * objects and arrays are checked and skipped.  Malformed or truncated
 * input is -EBADMSG, never a crash or an over-read.  Thread-safe.
 */
#ifndef MEMWALFS_JSON_H
#define MEMWALFS_JSON_H

#include <stddef.h>

/* Kind of a member's value. */
enum json_kind { JSON_STRING, JSON_NUMBER, JSON_LITERAL /* true, false, null */ };

/*
 * Called once per scalar member of the top-level object, in document order:
 * name and value decoded and NUL-terminated (value: a string's decoded text,
 * a number's or literal's text as written), valid during the call only.  A
 * nonzero return stops the walk and becomes json_walk_object()'s result.
 */
typedef int (*json_fn)(void *arg, const char *name, const char *value, size_t len,
                       enum json_kind kind);

/*
 * Walk the object in doc (n bytes).  Returns 0, -EBADMSG when doc is not
 * one well-formed JSON object (or a string holds a NUL), -ENOMEM, or fn's
 * nonzero return.
 */
int json_walk_object(const char *doc, size_t n, json_fn fn, void *arg);

#endif /* MEMWALFS_JSON_H */
