// Package e2e holds black-box tests of the real chime binary: TestMain
// builds ./cmd/chime once, and the tests start nodes as separate processes,
// register timers over the REST API and check the HTTP callbacks that a local
// receiver records.
//
// The single-node tests use SQLite and always run. The cluster test needs the
// MariaDB and Redis servers that scripts/test.sh starts (see
// internal/base/testenv); it is skipped without them unless
// CHIME_TEST_REQUIRE_SERVERS=1.
//
//	go test -race -count=1 ./e2e/      # SQLite only
//	scripts/test.sh ./e2e/             # with MariaDB and Redis
//	CHIME_E2E_BIN=/path/chime go test ./e2e/   # test a prebuilt binary
package e2e
