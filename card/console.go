package card

import "strconv"

// The web console's own words: its pages' chrome (headings, labels,
// columns, links, the notices of a page) and the messages of its
// refusals. The console's templates, handlers and script lay them out and
// choose none; the words of a request (its card, its forms, its history)
// are the card's as everywhere.

// ConsoleWords are the web console's words. Sentences with a link in them
// are split around the link's words (…Before, …Link, …After).
type ConsoleWords struct {
	// Every page.
	Product, Audit, Passkeys, SignOut string

	// The inbox.
	Inbox, WaitingOnYou, NothingWaits, YourRequests, NothingAsked                string
	ColRequest, ColTools, ColWhere, ColAskedBy, ColAsked, ColExpires, ColWaiting string
	WaitingCount                                                                 string // after a number: "(2 waiting)"

	// The approval page.
	Request              string // a request's page title, before its id
	PhraseLabel          string
	ReasonLabel          string
	AllowWithPasskey     string
	NeedsPasskeyBefore   string
	NeedsPasskeyLink     string
	NeedsPasskeyAfter    string
	NeedsFreshBefore     string
	NeedsFreshLink       string
	NeedsFreshAfter      string
	AllowedWithPasskey   string // the script's word once a passkey vote counted
	History              string
	ChooseAllowOrDeny    string
	PasskeyAdded         string
	PasskeyCount         func(n int) string // "You have 2 passkeys."
	PasskeysAbout        string
	AddPasskey           string
	AddPasskeyNeedsFresh string
	AddPasskeyFreshLink  string
	AddPasskeyFreshAfter string

	// The run page.
	Run, ItsRequest string

	// The audit page.
	FilterConversation, FilterTool, FilterActor, FilterClient, FilterSince, FilterUntil, Filter string
	ChainVerifies                                                                               func(rows, headID int64, headHash string) string
	ChainFails, VerifyChain, ExportBefore, ExportJSONL, ExportCSV                               string
	ColRow, ColAt, ColEvent, ColConversation, ColTool, ColActor, ColDetail                      string
	FilterUnreadable                                                                            string

	// Messages: a page's title and what it says.
	NotFoundTitle, NotFound                       string
	FailedTitle, Failed                           string
	RefusedTitle, ForeignForm                     string
	SignedOutTitle, SignedOut, NoSession          string
	SignInUnavailableTitle, SignInUnavailable     string
	SignInFailedTitle, SignInFailed               string
	UnknownPersonTitle, SignedInAs, UnknownPerson string // the email signed in goes between the last two
	NoPasskeysTitle, NoPasskeys                   string
	Continue                                      string

	// The script's and its endpoints' refusals.
	UnexpectedAnswer, Refused, PasskeyExpired, PasskeyNotVerified, Malformed, CallChanged, NoPasskeyYet string
	VoteExpired, VoteNotVerified, ArgumentsChanged                                                      string
}

// Console is the web console's words.
func Console() ConsoleWords {
	return ConsoleWords{
		Product: "Airlock", Audit: "Audit", Passkeys: "Passkeys", SignOut: "Sign out",

		Inbox: "Inbox", WaitingOnYou: "Waiting on you", NothingWaits: HomeNoWaiting, YourRequests: "Your requests",
		NothingAsked: HomeNoRequests,
		ColRequest:   "Request", ColTools: "Tools", ColWhere: "Where", ColAskedBy: "Asked by", ColAsked: "Asked", ColExpires: "Expires",
		ColWaiting: "Waiting", WaitingCount: "waiting",

		Request:            "Request",
		PhraseLabel:        "Confirmation phrase",
		ReasonLabel:        "Reason (for Deny; the agent is told)",
		AllowWithPasskey:   "Allow with passkey",
		NeedsPasskeyBefore: "Allowing this call needs your passkey. ",
		NeedsPasskeyLink:   "Add a passkey",
		NeedsPasskeyAfter:  " (within 5 minutes of signing in), then allow it here.",
		NeedsFreshBefore:   "Allowing this call needs a fresh sign-in (within the last 5 minutes). ",
		NeedsFreshLink:     "Sign in again",
		NeedsFreshAfter:    ", then allow it here.",
		AllowedWithPasskey: "Allowed with your passkey.",
		History:            HistoryHeading,
		ChooseAllowOrDeny:  "Choose Allow or Deny. Nothing changed.",

		PasskeyAdded: "Passkey added.", PasskeyCount: passkeyCount,
		PasskeysAbout:        "A call whose tier needs a passkey is allowed on its page with one.",
		AddPasskey:           "Add a passkey",
		AddPasskeyNeedsFresh: "Adding a passkey needs a fresh sign-in (within the last 5 minutes). ",
		AddPasskeyFreshLink:  "Sign in again",
		AddPasskeyFreshAfter: ", then add it.",

		Run: "Run", ItsRequest: "its request",

		FilterConversation: "Conversation", FilterTool: "Tool", FilterActor: "Actor", FilterClient: "Client", FilterSince: "Since",
		FilterUntil: "Until", Filter: "Filter",
		ChainVerifies: chainVerifies, ChainFails: "The chain does not verify:", VerifyChain: "Verify the chain",
		ExportBefore: "Export the rows shown by these filters:", ExportJSONL: "JSON lines", ExportCSV: "CSV",
		ColRow: "Row", ColAt: "At", ColEvent: "Event", ColConversation: "Conversation", ColTool: "Tool", ColActor: "Actor", ColDetail: "Detail",
		FilterUnreadable: "A filter does not read: ",

		NotFoundTitle: "Not found", NotFound: "There is nothing here for you.",
		FailedTitle: "Something went wrong", Failed: "Something went wrong; nothing changed. The operators have the details in the logs.",
		RefusedTitle: "Refused", ForeignForm: "This request did not come from the console's own page. Nothing changed.",
		SignedOutTitle: "Signed out", SignedOut: "You are signed out.",
		NoSession:              "You are not signed in (or your session ended). Nothing changed. Sign in and try again.",
		SignInUnavailableTitle: "Sign-in unavailable", SignInUnavailable: "The sign-in provider can't be reached right now. Try again in a minute.",
		SignInFailedTitle: "Sign-in failed", SignInFailed: "This sign-in can't be completed. Start again from the sign-in page.",
		UnknownPersonTitle: "Not a known person", SignedInAs: "You signed in as ", UnknownPerson: ", who is not in Airlock's web.people. Ask an operator to add you.",
		NoPasskeysTitle: "No passkeys here", NoPasskeys: "Passkeys need the console on a domain name (web.base_url), not an IP address.",
		Continue: "Continue",

		UnexpectedAnswer:   "An unexpected answer. Nothing changed.",
		Refused:            "Refused. Nothing changed.",
		PasskeyExpired:     "This registration expired or was already used. Start again.",
		PasskeyNotVerified: "The passkey could not be verified. Nothing changed.",
		Malformed:          "A malformed request. Nothing changed.",
		CallChanged:        "This call no longer waits, or changed since the page was loaded: reload it. Nothing changed.",
		NoPasskeyYet:       "You have no passkey yet: add one on the Passkeys page.",
		VoteExpired:        "This passkey request expired or was already used. Try again. Nothing changed.",
		VoteNotVerified:    "The passkey's answer could not be verified. Nothing changed.",
		ArgumentsChanged:   "The call's arguments changed since your passkey signed them: reload the page. Nothing changed.",
	}
}

func passkeyCount(n int) string {
	if n == 1 {
		return "You have 1 passkey."
	}
	return "You have " + strconv.Itoa(n) + " passkeys."
}

func chainVerifies(rows, headID int64, headHash string) string {
	return "The chain verifies: " + strconv.FormatInt(rows, 10) + " rows, head " + strconv.FormatInt(headID, 10) + " (" + headHash + ")."
}
