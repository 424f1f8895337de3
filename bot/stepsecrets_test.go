package bot_test

import (
	"context"
	"database/sql"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlockhq/airlock/bot"
	"github.com/airlockhq/airlock/config"
	"github.com/airlockhq/airlock/confirm"
	"github.com/airlockhq/airlock/redact"
	"github.com/airlockhq/airlock/rules"
	"github.com/airlockhq/airlock/storage"
)

const (
	envToken   = "tok-live-9f8e7d6c5b4a3921"   // AIRLOCK_DEPLOY_TOKEN
	fileSecret = "file-secret-0a1b2c3d4e5f607" // the text of a ${file:PATH}
)

// shipConfig is a configuration whose runbook's one step sends a token
// read from the environment and a key read from a file.
func shipConfig(t *testing.T) *config.Config {
	t.Helper()
	keyFile := filepath.Join(t.TempDir(), "deploy.key")
	if err := os.WriteFile(keyFile, []byte(fileSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	yaml := `
model: {provider: openai, name: test-model, base_url: "http://127.0.0.1:9/v1"}
tools:
  - name: deploy
    description: deploy
    confirm: true
    exec: {command: ["true"]}
runbooks:
  - name: ship
    parameters:
      type: object
      properties: {service: {type: string}}
      required: [service]
    steps:
      - id: ship
        tool: deploy
        args:
          service: "{{ params.service }}"
          headers: {Authorization: "Bearer ${AIRLOCK_DEPLOY_TOKEN}"}
          key: "${file:` + keyFile + `}"
`
	cfg, err := config.Parse([]byte(yaml), func(k string) (string, bool) {
		if k == "AIRLOCK_DEPLOY_TOKEN" {
			return envToken, true
		}
		return "", false
	})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// Item 8: a runbook step's secrets read from the environment or a file
// are written to the database nowhere in the clear: the run's snapshot,
// the call's stored arguments, the card, the audit and the webhook
// bodies hold the reference, and an approval binds to it. The tool still
// receives the values, put in only where the configuration put them: an
// approver's edit that moves a reference elsewhere moves its text, not
// the secret. The database files (SQLite) or every row (PostgreSQL) are
// read after the runs: neither value is in them.
func TestStepSecretsNeverStored(t *testing.T) {
	onStores(t, func(t *testing.T, driver string) {
		ctx := context.Background()
		cfg := shipConfig(t)
		r := redact.New(cfg.Secrets())
		deploy := &argTool{name: "deploy"}
		var dsn string
		h := newRBHarness(t, withTool(deploy, "deploy", func(c *bot.Config) {
			c.Store, dsn = openStoreAt(t, driver, c.Now, storage.WithScrub(r.String))
			c.Runbooks = cfg.RunbookSet()
			c.StepSecret = cfg.StepSecret
			c.Redact = r.String
		}))
		if err := h.store.SetWebhooks([]storage.WebhookTarget{{ID: "siem", MaxResultBytes: 4096}}); err != nil {
			t.Fatal(err)
		}
		runShip(t, h, "T1", "api")
		first := lastPosted(h.harness)
		if args := first.Calls[0].Args; !strings.Contains(args, "Bearer ${AIRLOCK_DEPLOY_TOKEN}") || !strings.Contains(args, "${file:") {
			t.Fatalf("the card shows %s, want the references", args)
		}
		if err := h.bot.Decide(ctx, allowOn(t, h.harness, "alice", first.BatchID)); err != nil {
			t.Fatal(err)
		}
		h.settle()
		want := fmt.Sprintf(`{"headers":{"Authorization":"Bearer %s"},"key":"%s","service":"api"}`, envToken, fileSecret)
		if got := deploy.ran(); len(got) != 1 || got[0] != want {
			t.Fatalf("the tool received %q, want %s", got, want)
		}

		// An approver moves the token's reference into another argument:
		// that argument gets the reference's text, never the secret.
		runShip(t, h, "T2", "web")
		second := lastPosted(h.harness)
		if second.BatchID == first.BatchID {
			t.Fatal("no card for the second run")
		}
		moved := `{"service":"${AIRLOCK_DEPLOY_TOKEN}","headers":{"Authorization":"Bearer ${AIRLOCK_DEPLOY_TOKEN}"},"key":"none"}`
		if err := h.bot.Edit(ctx, onCard(t, h.harness, "alice", second.BatchID), moved); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the edited call's run ended", func() bool { return len(h.liveRuns()) == 0 })
		h.settle()
		if got := deploy.ran()[1]; got != `{"headers":{"Authorization":"Bearer `+envToken+`"},"key":"none","service":"${AIRLOCK_DEPLOY_TOKEN}"}` {
			t.Fatalf("the edited call ran with %s", got)
		}
		for _, id := range []string{first.BatchID, second.BatchID} {
			if c := storedCall(t, h.harness, id); c.Run != confirm.RunSucceeded {
				t.Fatalf("call of %s: %s", id, c.Run)
			}
		}

		for _, secret := range []string{envToken, fileSecret} {
			for where, text := range databaseText(t, driver, dsn) {
				for _, form := range []string{secret, hex.EncodeToString([]byte(secret))} {
					if strings.Contains(text, form) {
						t.Errorf("%s holds a secret read from the environment or a file (%q)", where, form)
					}
				}
			}
		}
	})
}

// databaseText is everything the database holds, by where: the SQLite
// files' bytes (the database and its write-ahead log), or every row of
// every table of the PostgreSQL schema as text.
func databaseText(t *testing.T, driver, dsn string) map[string]string {
	t.Helper()
	out := map[string]string{}
	if driver == "sqlite" {
		for _, f := range []string{dsn, dsn + "-wal", dsn + "-shm"} {
			b, err := os.ReadFile(f)
			if err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
			out[filepath.Base(f)] = string(b)
		}
		if len(out[filepath.Base(dsn)]) == 0 {
			t.Fatal("the SQLite file is empty")
		}
		return out
	}
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'`)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, name)
	}
	rows.Close()
	if len(tables) < 5 {
		t.Fatalf("tables %v", tables)
	}
	for _, table := range tables {
		rs, err := db.Query(`SELECT CAST(t AS text) FROM "` + table + `" t`)
		if err != nil {
			t.Fatal(err)
		}
		var sb strings.Builder
		for rs.Next() {
			var row string
			if err := rs.Scan(&row); err != nil {
				t.Fatal(err)
			}
			sb.WriteString(row + "\n")
		}
		rs.Close()
		out["table "+table] = sb.String()
	}
	if !strings.Contains(out["table runbook_runs"], `""Name"":""ship""`) {
		t.Fatalf("the runs' snapshots are not among the rows read: %q", out["table runbook_runs"])
	}
	return out
}

// runShip has bob run the ship runbook for service in thread th.
func runShip(t *testing.T, h *rbHarness, th, service string) {
	t.Helper()
	if err := h.bot.HandleTurn(context.Background(), bot.Turn{Platform: "test", Channel: "C1", Thread: th, User: "bob", Text: "run ship service=" + service}); err != nil {
		t.Fatal(err)
	}
	h.settle()
}

// Item 8, failing closed: a step whose secret is not configured any more
// (a process started without it) does not run its tool, never with the
// reference in the secret's place; the step fails saying which
// reference, not a value.
func TestStepSecretMissingDoesNotRun(t *testing.T) {
	onStores(t, func(t *testing.T, driver string) {
		cfg := shipConfig(t)
		deploy := &argTool{name: "deploy"}
		h := newRBHarness(t, withTool(deploy, "deploy", useStore(t, driver, func(c *bot.Config) {
			c.Runbooks = cfg.RunbookSet() // and no StepSecret
		})))
		runShip(t, h, "T1", "api")
		if err := h.bot.Decide(context.Background(), allowOn(t, h.harness, "alice", lastPosted(h.harness).BatchID)); err != nil {
			t.Fatal(err)
		}
		h.settle()
		if got := deploy.ran(); len(got) != 0 {
			t.Fatalf("the tool ran with %v", got)
		}
		live, err := h.store.LiveRunbookRuns(context.Background())
		if err != nil || len(live) != 0 {
			t.Fatalf("live runs %v, %v", live, err)
		}
		c := storedCall(t, h.harness, lastPosted(h.harness).BatchID)
		if c.Run != confirm.RunFailed || !strings.Contains(c.Result, "${AIRLOCK_DEPLOY_TOKEN}") || !strings.Contains(c.Result, "not configured") {
			t.Fatalf("call %s: %q", c.Run, c.Result)
		}
	})
}

// A rule over a step's argument that holds a secret reference judges the
// value it will run with, not the reference's text: a step whose
// environment comes from ${AIRLOCK_DEPLOY_ENV} = production is asked for
// by the rule about production (before, the rule saw "${…}" and the
// step ran with no card). The call is still stored and shown with the
// reference.
func TestStepSecretsJudgedByTheirValue(t *testing.T) {
	onStores(t, func(t *testing.T, driver string) {
		ctx := context.Background()
		yaml := `
model: {provider: openai, name: test-model, base_url: "http://127.0.0.1:9/v1"}
tools:
  - name: deploy
    description: deploy
    exec: {command: ["true"]}
runbooks:
  - name: ship
    parameters:
      type: object
      properties: {service: {type: string}}
      required: [service]
    steps:
      - id: ship
        tool: deploy
        args:
          service: "{{ params.service }}"
          environment: "${AIRLOCK_DEPLOY_ENV}"
`
		cfg, err := config.Parse([]byte(yaml), func(k string) (string, bool) {
			if k == "AIRLOCK_DEPLOY_ENV" {
				return "production", true
			}
			return "", false
		})
		if err != nil {
			t.Fatal(err)
		}
		set, err := rules.Compile([]rules.Config{
			{Name: "prod", When: `tool == "deploy" && args.environment == "production"`, Action: rules.ActionAsk},
		})
		if err != nil {
			t.Fatal(err)
		}
		deploy := &quietTool{argTool{name: "deploy"}}
		h := newRBHarness(t, withTool(deploy, "deploy", func(c *bot.Config) {
			c.Store, _ = openStoreAt(t, driver, c.Now)
			c.Runbooks = cfg.RunbookSet()
			c.StepSecret = cfg.StepSecret
			c.Policy = confirm.NewPolicy(true, nil, set)
		}))
		runShip(t, h, "T1", "api")
		if got := deploy.ran(); len(got) != 0 {
			t.Fatalf("the step ran with no card: %q", got)
		}
		card := lastPosted(h.harness)
		if args := card.Calls[0].Args; !strings.Contains(args, "${AIRLOCK_DEPLOY_ENV}") {
			t.Fatalf("the card shows %s, want the reference", args)
		}
		if c := storedCall(t, h.harness, card.BatchID); c.Decision != confirm.DecisionPending || !strings.Contains(confirm.ReasonsText(c.Reasons), "prod") {
			t.Fatalf("stored call: %s, reasons %v", c.Decision, c.Reasons)
		}
		if err := h.bot.Decide(ctx, allowOn(t, h.harness, "alice", card.BatchID)); err != nil {
			t.Fatal(err)
		}
		h.settle()
		if got := deploy.ran(); len(got) != 1 || got[0] != `{"environment":"production","service":"api"}` {
			t.Fatalf("the tool received %q", got)
		}
	})
}

// quietTool is an argTool that does not ask by itself: only a rule does.
type quietTool struct{ argTool }

func (*quietTool) Confirm() bool { return false }
