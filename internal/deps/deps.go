// Package deps pins the project's dependencies in go.mod while the packages
// that use them are being written. Remove once every one is imported.
package deps

import (
	_ "github.com/go-sql-driver/mysql"
	_ "github.com/gofrs/flock"
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "github.com/oklog/ulid/v2"
	_ "github.com/panjf2000/ants/v2"
	_ "github.com/prometheus/client_golang/prometheus/promhttp"
	_ "github.com/redis/go-redis/v9"
	_ "go.yaml.in/yaml/v3"
	_ "modernc.org/sqlite"
)
