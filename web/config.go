// Package web is Airlock's signed-in web console (issue 38): people sign in
// with the organisation's OpenID Connect provider (authorization code with
// PKCE), are matched to their chat identities by `web.people`, and see what
// waits on them (the inbox) and each request whole (its approval page),
// where they may allow or deny with the same single-use decision as a
// click. Pages are server-rendered with html/template, everything outside
// Airlock's words inert; cookies are HttpOnly and SameSite=Lax, every
// state-changing request is checked against cross-site forgery, and a
// strict Content-Security-Policy holds. This file holds the configuration
// (`web:`); server.go serves the pages over the approval core's Console.
package web

import (
	"fmt"
	"net/mail"
	"net/url"
	"regexp"
	"strings"

	"github.com/airlockhq/airlock/keyerr"
)

// Config is the `web:` section; off while BaseURL is empty.
type Config struct {
	// BaseURL is where people reach Airlock (https in production): the
	// console is served under <base_url>/ui/, and links point there.
	BaseURL string `yaml:"base_url"`
	OIDC    OIDC   `yaml:"oidc"`
	// People are who a signed-in person is on each platform.
	People []Person `yaml:"people"`
	// Auditors are the emails (of People) who may read the audit on the
	// console.
	Auditors []string `yaml:"auditors"`
}

// OIDC is `web.oidc`: the provider people sign in with.
type OIDC struct {
	Issuer       string `yaml:"issuer"`
	ClientID     string `yaml:"client_id"`
	ClientSecret string `yaml:"client_secret"`
}

// Person is one entry of `web.people`: an email the provider vouches for,
// and the person's user ids on the chat platforms.
type Person struct {
	Email   string `yaml:"email"`
	Slack   string `yaml:"slack"`
	Discord string `yaml:"discord"`
}

// On reports whether the console is configured.
func (c Config) On() bool { return c.BaseURL != "" }

var (
	slackUser      = regexp.MustCompile(`^[UW][A-Z0-9]{2,30}$`)
	discordUser    = regexp.MustCompile(`^[0-9]{5,20}$`)
	secureSchemes  = map[string]bool{"https": true, "http": true}
	loopbackPrefix = []string{"localhost", "127.", "[::1]"}
)

// Validate checks the section; section is its name in the file ("web").
// Its error is a *keyerr.Error naming the key.
func (c Config) Validate(section string) error {
	if !c.On() {
		if c.OIDC != (OIDC{}) || len(c.People) > 0 || len(c.Auditors) > 0 {
			return keyerr.New(section+".base_url", "required when %s is set", section)
		}
		return nil
	}
	u, err := url.Parse(c.BaseURL)
	switch {
	case err != nil || !secureSchemes[u.Scheme] || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "":
		return keyerr.New(section+".base_url", "must be an absolute http(s) URL without user, query or fragment, such as https://airlock.example.com")
	case u.Scheme == "http" && !loopback(u.Hostname()):
		return keyerr.New(section+".base_url", "must be https (http only on localhost)")
	}
	o := section + ".oidc"
	iss, err := url.Parse(c.OIDC.Issuer)
	switch {
	case c.OIDC.Issuer == "":
		return keyerr.New(o+".issuer", "required")
	case err != nil || !secureSchemes[iss.Scheme] || iss.Host == "" || (iss.Scheme == "http" && !loopback(iss.Hostname())):
		return keyerr.New(o+".issuer", "must be an https URL (http only on localhost)")
	case strings.TrimSpace(c.OIDC.ClientID) == "":
		return keyerr.New(o+".client_id", "required")
	}
	if len(c.People) == 0 {
		return keyerr.New(section+".people", "required: nobody could use the console")
	}
	seen := map[string]int{}
	for i, p := range c.People {
		key := fmt.Sprintf("%s.people[%d]", section, i)
		email := strings.ToLower(strings.TrimSpace(p.Email))
		if a, err := mail.ParseAddress(p.Email); err != nil || a.Address != p.Email {
			return keyerr.New(key+".email", "%q is not an email address", p.Email)
		}
		if j, dup := seen[email]; dup {
			return keyerr.New(key+".email", "%s is also people[%d]", p.Email, j)
		}
		seen[email] = i
		switch {
		case p.Slack == "" && p.Discord == "":
			return keyerr.New(key, "needs slack or discord: who the person is in chat")
		case p.Slack != "" && !slackUser.MatchString(p.Slack):
			return keyerr.New(key+".slack", "%q is not a Slack user id (U…)", p.Slack)
		case p.Discord != "" && !discordUser.MatchString(p.Discord):
			return keyerr.New(key+".discord", "%q is not a Discord user id", p.Discord)
		}
	}
	for i, a := range c.Auditors {
		if _, ok := seen[strings.ToLower(strings.TrimSpace(a))]; !ok {
			return keyerr.New(fmt.Sprintf("%s.auditors[%d]", section, i), "%q is not one of %s.people", a, section)
		}
	}
	return nil
}

// Auditor reports whether email is one of the auditors.
func (c Config) Auditor(email string) bool {
	for _, a := range c.Auditors {
		if strings.EqualFold(strings.TrimSpace(a), strings.TrimSpace(email)) {
			return true
		}
	}
	return false
}

func loopback(host string) bool {
	for _, p := range loopbackPrefix {
		if strings.HasPrefix(host, p) || host == "::1" {
			return true
		}
	}
	return false
}

// Person is the configured person of a verified email; false for none.
func (c Config) Person(email string) (Person, bool) {
	email = strings.ToLower(strings.TrimSpace(email))
	for _, p := range c.People {
		if strings.ToLower(p.Email) == email {
			return p, true
		}
	}
	return Person{}, false
}

// ID is the person's user id on platform ("" for none).
func (p Person) ID(platform string) string {
	switch platform {
	case "slack":
		return p.Slack
	case "discord":
		return p.Discord
	}
	return ""
}
