package main

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/tinyllm/durable/activity"
	"github.com/tinyllm/durable/server"
)

// tokenPrefix marks durable bearer tokens, so secret scanners and people can
// tell one when they see it.
const tokenPrefix = "dur_"

const tokenUsage = `Usage: durabled token [--name NAME --role ROLE [--task-queues Q1,Q2]]

Prints a new random bearer token and its SHA-256. Give the token to the
client (DURABLE_TOKEN, or --token); put only the hash in the auth file, as a
principal's token_sha256. With --name and --role it also prints the
principal's entry, ready to paste into the file's "principals" list.

Roles: worker (runs tasks of its task queues and starts workflows on them),
reader (reads workflows, dead letters, stats, the audit log and Watch),
operator (a reader that may also redrive).

Flags:
`

// tokenCommand is "durabled token": it prints a token, its hash and,
// optionally, an auth file entry.
func tokenCommand(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("durabled token", flag.ContinueOnError)
	fs.SetOutput(stderr)
	name := fs.String("name", "", "principal `name` for the printed auth file entry")
	role := fs.String("role", "", "principal `role` for the entry: worker, reader or operator")
	queues := fs.String("task-queues", "", "comma-separated task `queues` a worker is limited to")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), tokenUsage)
		fs.PrintDefaults()
	}
	for _, a := range args {
		if a == "-h" || a == "-help" || a == "--help" {
			fs.SetOutput(stdout)
		}
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "durabled token: unexpected arguments %q\n", strings.Join(fs.Args(), " "))
		return exitUsage
	}
	switch {
	case (*name == "") != (*role == ""):
		fmt.Fprintln(stderr, "durabled token: --name and --role go together")
		return exitUsage
	case *role != "" && *role != string(server.RoleWorker) && *role != string(server.RoleReader) && *role != string(server.RoleOperator):
		fmt.Fprintf(stderr, "durabled token: --role %q is not one of worker, reader, operator\n", *role)
		return exitUsage
	case *queues != "" && *role != string(server.RoleWorker):
		fmt.Fprintln(stderr, "durabled token: --task-queues limits workers only")
		return exitUsage
	}
	// The entry must load: names and queues follow the rule for ids.
	if *name != "" {
		if err := activity.CheckID(*name); err != nil {
			fmt.Fprintf(stderr, "durabled token: --name %q %v\n", *name, err)
			return exitUsage
		}
	}
	if *queues != "" {
		for _, q := range strings.Split(*queues, ",") {
			if err := activity.CheckID(q); err != nil {
				fmt.Fprintf(stderr, "durabled token: --task-queues: %q %v\n", q, err)
				return exitUsage
			}
		}
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		fmt.Fprintf(stderr, "durabled token: %v\n", err)
		return exitError
	}
	token := tokenPrefix + base64.RawURLEncoding.EncodeToString(raw[:])
	sum := sha256.Sum256([]byte(token))
	hash := hex.EncodeToString(sum[:])
	fmt.Fprintf(stdout, "token         %s\ntoken_sha256  %s\n", token, hash)
	if *name == "" {
		return exitOK
	}
	entry := map[string]any{"name": *name, "role": *role, "token_sha256": hash}
	if *queues != "" {
		entry["task_queues"] = strings.Split(*queues, ",")
	}
	b, err := json.Marshal(entry)
	if err != nil {
		fmt.Fprintf(stderr, "durabled token: %v\n", err)
		return exitError
	}
	fmt.Fprintf(stdout, "principal     %s\n", b)
	return exitOK
}
