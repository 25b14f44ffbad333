/*
 * xml.h - a small, strict XML reader for the S3 responses the store needs.
 *
 * Not a general XML parser: it accepts the subset S3 servers send (an
 * optional <?xml ...?> declaration, comments, elements with attributes,
 * character data with the five predefined entities and numeric character
 * references, self-closing elements) and rejects everything else -
 * mismatched or unclosed tags, text after the root, bad entities, CDATA,
 * DOCTYPE, nesting deeper than 16 - with -EBADMSG.  Malformed or truncated
 * input is an error, never a crash or an over-read: every function takes
 * (doc, n) and never reads past n.
 *
 * Element paths are the names from the root joined by '/', without
 * namespace prefixes ("ListBucketResult/Contents/Key").  All functions are
 * thread-safe; results are malloc()ed and freed by the matching _free.
 */
#ifndef MEMWALFS_XML_H
#define MEMWALFS_XML_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Walk a document.  fn is called for each leaf element (no child elements)
 * with its path and decoded text (NUL-terminated, len bytes), and, with
 * text NULL, when any element that had children closes.  A nonzero return
 * from fn stops the walk and is returned.  Returns 0 or -EBADMSG.
 */
typedef int (*xml_fn)(void *arg, const char *path, const char *text, size_t len);
int xml_walk(const char *doc, size_t n, xml_fn fn, void *arg);

/*
 * S3 <Error>: fills code and message (truncated to their sizes, "" when
 * absent).  Returns 0 when doc is an <Error> document, -EBADMSG otherwise.
 */
int xml_parse_error(const char *doc, size_t n, char *code, size_t codesz, char *msg, size_t msgsz);

/* One key of a listing page. */
struct xml_list_entry {
	char *key;     /* decoded (encoding-type=url undone) */
	uint64_t size; /* Size */
};

/* One ListObjectsV2 page. */
struct xml_list_page {
	struct xml_list_entry *v; /* n entries in server order */
	size_t n;
	bool truncated;   /* IsTruncated */
	char *next_token; /* NextContinuationToken (NULL if none) */
};

/*
 * Parse a ListObjectsV2 response into *out (zeroed first; free with
 * xml_list_page_free even on error).  Keys are URL-decoded when the
 * response says <EncodingType>url</EncodingType>.  A truncated page without
 * a continuation token, a Contents without Key or Size, or a bad number is
 * -EBADMSG.
 */
int xml_parse_list_page(const char *doc, size_t n, struct xml_list_page *out);
void xml_list_page_free(struct xml_list_page *p);

/* InitiateMultipartUploadResult: *upload_id is malloc()ed.  -EBADMSG if absent. */
int xml_parse_initiate(const char *doc, size_t n, char **upload_id);

/*
 * CompleteMultipartUploadResult.  S3 may answer 200 with an <Error> body:
 * then returns -EIO and fills code/msg.  0 on a result document, -EBADMSG
 * on anything else.
 */
int xml_parse_complete(const char *doc, size_t n, char *code, size_t codesz, char *msg,
                       size_t msgsz);

/*
 * DeleteResult: *nerr gets the number of <Error> entries other than
 * NoSuchKey; the first one's key and code are copied (truncated).
 */
int xml_parse_delete_result(const char *doc, size_t n, unsigned *nerr, char *key, size_t keysz,
                            char *code, size_t codesz);

/* One in-progress multipart upload. */
struct xml_upload {
	char *key;
	char *upload_id;
	int64_t initiated; /* seconds since the epoch */
};

/* One ListMultipartUploads page. */
struct xml_uploads_page {
	struct xml_upload *v;
	size_t n;
	bool truncated;
	char *next_key_marker;       /* NULL if none */
	char *next_upload_id_marker; /* NULL if none */
};

int xml_parse_uploads_page(const char *doc, size_t n, struct xml_uploads_page *out);
void xml_uploads_page_free(struct xml_uploads_page *p);

/*
 * Decode %XX escapes (and '+' as space, as S3's url encoding-type does not
 * produce '+' for anything else) in place.  Returns -EBADMSG on a bad or
 * NUL-producing escape.
 */
int xml_url_decode(char *s);

/*
 * UTF-8 of code point cp into b: returns its length (1-4), or -EBADMSG for
 * NUL, a surrogate or a value past U+10FFFF.  (Also used by json.c.)
 */
int xml_utf8(unsigned long cp, char b[4]);

/* Escape s for XML character data into a malloc()ed string (NULL: ENOMEM). */
char *xml_escape(const char *s);

#endif /* MEMWALFS_XML_H */
