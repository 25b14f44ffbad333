/*
 * profile.h - profiles of the AWS shared config and credentials files
 * (~/.aws/config, ~/.aws/credentials), as the AWS CLI and SDKs read them.
 *
 * Both files are INI: "[section]" lines, "key = value" lines, comments on
 * lines of their own starting with '#' or ';'.  Key names are compared
 * without regard to case; profile names are case-sensitive.  An indented
 * line under a key with an empty value is a nested setting (e.g.
 * "s3 =\n  max_concurrent_requests = 4"): it is skipped.
 *
 * In the credentials file a profile is "[NAME]".  In the config file it is
 * "[profile NAME]", and "[default]" (or "[profile default]") for the
 * default profile; other sections there ("[sso-session x]", a bare "[x]")
 * are not profiles.  A profile's settings are those of the config file
 * with the credentials file's ones for the same profile on top.
 *
 * Thread-safe (no shared state).  Values are secrets (aws_secret_access_key):
 * never log them; profile_free() wipes them.
 */
#ifndef MEMWALFS_PROFILE_H
#define MEMWALFS_PROFILE_H

#include <stdbool.h>
#include <stddef.h>

/* The settings of one profile. */
struct profile;

/*
 * Add the settings of profile name found in text (n bytes) to *p, replacing
 * settings of the same key: in_config says which file's rules apply.
 * Returns 1 when the text had a section for the profile, 0 when not,
 * -ENOMEM.
 */
int profile_parse(struct profile *p, const char *text, size_t n, bool in_config, const char *name);

/* An empty profile (NULL: ENOMEM).  Free with profile_free(). */
struct profile *profile_new(void);

/*
 * Load profile name from the config file and then the credentials file
 * (either path may be NULL or name a missing file).  *out only on success:
 * 0 when either file has the profile, -ENOENT when neither has it, -ENOMEM,
 * or the negative errno of a file that exists but cannot be read (logged).
 */
int profile_load(const char *config_file, const char *cred_file, const char *name,
                 struct profile **out);

/* Value of key (case-insensitive) or NULL; valid until profile_free(). */
const char *profile_get(const struct profile *p, const char *key);

/* Free p, wiping the values.  Accepts NULL. */
void profile_free(struct profile *p);

/*
 * Default paths: AWS_CONFIG_FILE or ~/.aws/config, AWS_SHARED_CREDENTIALS_FILE
 * or ~/.aws/credentials ("~" is HOME).  Written into buffers of sz bytes.
 */
void profile_default_paths(char *config, char *cred, size_t sz);

#endif /* MEMWALFS_PROFILE_H */
