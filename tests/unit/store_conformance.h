/*
 * store_conformance.h - the one conformance suite every store must pass.
 *
 * run_store_conformance(kind) opens a fresh test store of kind ("local",
 * "fault", "s3", "sub-local", "sub-s3"; see tests/util/testutil.h), runs every
 * check of the store contract (s3/include/store.h) against it with cmocka and
 * wipes what it wrote.  For a sub-prefix view it also checks at the end that
 * the parent's keys outside the view are intact (tu_sub_check_outside()).
 * Returns the number of failed tests (0: all passed), TU_SKIP (77) when the
 * kind cannot run here, so a runner can `return run_store_conformance(k);`
 * from main.
 */
#ifndef MEMWALFS_STORE_CONFORMANCE_H
#define MEMWALFS_STORE_CONFORMANCE_H

int run_store_conformance(const char *kind);

#endif /* MEMWALFS_STORE_CONFORMANCE_H */
