// Package timers is the domain home of a timer definition: every rule about
// a timer that does not depend on how it reached chime (the REST API, the Go
// library's Upsert, the command line) lives here, once.
//
// Start reading at Service, the one path that saves a timer: it validates
// and normalises the definition (Validate, ValidateOptions), writes it to
// the store, decides from what changed whether its runs must be replanned
// (NeedsReplan), tells the engine (Engine), and gives the timer's app its
// first webhook signing secret. The REST API (package api) and the library
// (package chime) both save through a Service; they only translate their
// own input into a model.Timer first (JSON with Go duration strings, or a
// chime.Timer whose zero fields take the defaults, see Defaults and
// FillDefaults).
//
// The rest are the pure rules the save path and the engine share:
//
//   - Defaults, FillDefaults and the Default constants: the value of every
//     field a definition leaves out;
//   - Validate: the checks, with the field names and messages that the REST
//     API answers in its 400s (they are a contract);
//   - LoadLocation, Schedule: a timer's compiled schedule in its zone, with
//     zones loaded once and shared, so that the schedule package's per-zone
//     tables are built once per zone; "Local" is refused everywhere;
//   - NextFireTimes and Preview: the next fires of a timer, or of a spec;
//   - NeedsReplan and SameDefinition: what an update changed.
//
// The package depends on model, schedule, store, egress and webhook only:
// never on the REST server, so that the library does not pull it in.
package timers
