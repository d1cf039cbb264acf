package main

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// What a rule does to each request it matches.
const (
	// Hold the request, and everything after it on its connection, as a stalled TCP stream
	// would, until released (after HoldMs, or by the API). If the client has closed its end by
	// then, the request alone is delivered on a connection of its own and its answer dropped:
	// a request that reaches the broker after its client gave up on it.
	actionHold = "hold"
	// Never deliver the request; the connection stalls behind it until the client closes it.
	actionDropRequest = "drop-request"
	// Deliver the request but not its answer; every later answer on the connection is lost too,
	// as a broken return path loses them.
	actionDropResponse = "drop-response"
	// Deliver the request twice; the client gets the first answer.
	actionDuplicate = "duplicate"
	// Answer the request with ErrorCode in place of the broker, which never sees it.
	actionAnswer = "answer"
)

// Rule says which requests to act on and how. Empty match fields match anything.
type Rule struct {
	ID              string   `json:"id"`
	Lanes           []string `json:"lanes,omitempty"`
	APIKey          int16    `json:"api_key"`
	ClientID        string   `json:"client_id,omitempty"` // a prefix of the header's client id
	TransactionalID string   `json:"transactional_id,omitempty"`
	Group           string   `json:"group,omitempty"`
	Action          string   `json:"action"`
	HoldMs          int      `json:"hold_ms,omitempty"`
	// hold: once the client closes its connection, deliver the held request this long after
	// (a request that lands after its client retried elsewhere); absent: wait for HoldMs or
	// the API
	ReleaseAfterCloseMs *int  `json:"release_after_close_ms,omitempty"`
	ErrorCode           int16 `json:"error_code,omitempty"`
	Limit               int64 `json:"limit,omitempty"` // act on at most this many; 0: no limit
}

// Effects counts what a rule did: the fault's observed effect.
type Effects struct {
	Matched          int64 `json:"matched"`
	Held             int64 `json:"held"`
	Released         int64 `json:"released"`          // delivered on their own connection
	ReleasedAlone    int64 `json:"released_alone"`    // of those, after their client closed
	Discarded        int64 `json:"discarded"`         // held behind one, lost with the connection
	DroppedRequests  int64 `json:"dropped_requests"`  // never delivered
	DroppedResponses int64 `json:"dropped_responses"` // the matched requests' answers only
	Duplicated       int64 `json:"duplicated"`
	Answered         int64 `json:"answered"`
	Skipped          int64 `json:"skipped"` // matched by API but not decodable or answerable here
}

func (r *Rule) validate() error {
	switch r.Action {
	case actionHold:
		if r.ReleaseAfterCloseMs != nil && *r.ReleaseAfterCloseMs < 0 {
			return fmt.Errorf("rule %q: release_after_close_ms must be >= 0", r.ID)
		}
	case actionDropRequest, actionDropResponse, actionDuplicate:
	case actionAnswer:
		if r.ErrorCode == 0 {
			return fmt.Errorf("rule %q: answer needs a non-zero error_code", r.ID)
		}
		if !answerable(r.APIKey) {
			return fmt.Errorf("rule %q: cannot answer API key %d; answerable: %v", r.ID, r.APIKey, answerableKeys())
		}
	default:
		return fmt.Errorf("rule %q: unknown action %q", r.ID, r.Action)
	}
	if r.ID == "" {
		return fmt.Errorf("a rule needs an id")
	}
	if kmsg.NameForKey(r.APIKey) == "" {
		return fmt.Errorf("rule %q: unknown API key %d", r.ID, r.APIKey)
	}
	return nil
}

// needsBody says whether matching reads the request's body, not only its header.
func (r *Rule) needsBody() bool { return r.TransactionalID != "" || r.Group != "" }

func (r *Rule) onLane(lane string) bool {
	if len(r.Lanes) == 0 {
		return true
	}
	for _, l := range r.Lanes {
		if l == lane {
			return true
		}
	}
	return false
}

// matchesBody compares the transactional id and group a decoded request names. A rule that
// answers an OffsetFetch with UNSTABLE_OFFSET_COMMIT matches only a fetch that asked for stable
// offsets (RequireStable: a read_committed consumer's), the only one a broker answers so.
func (r *Rule) matchesBody(req kmsg.Request) bool {
	if r.Action == actionAnswer && r.ErrorCode == unstableOffsetCommit {
		if fetch, ok := req.(*kmsg.OffsetFetchRequest); ok && !fetch.RequireStable {
			return false
		}
	}
	txn, groups := identities(req)
	if r.TransactionalID != "" && txn != r.TransactionalID {
		return false
	}
	if r.Group != "" {
		for _, g := range groups {
			if g == r.Group {
				return true
			}
		}
		return false
	}
	return true
}

// identities returns the transactional id and the groups a request is about.
func identities(req kmsg.Request) (string, []string) {
	switch r := req.(type) {
	case *kmsg.ProduceRequest:
		if r.TransactionID != nil {
			return *r.TransactionID, nil
		}
	case *kmsg.InitProducerIDRequest:
		if r.TransactionalID != nil {
			return *r.TransactionalID, nil
		}
	case *kmsg.AddPartitionsToTxnRequest:
		return r.TransactionalID, nil
	case *kmsg.AddOffsetsToTxnRequest:
		return r.TransactionalID, []string{r.Group}
	case *kmsg.EndTxnRequest:
		return r.TransactionalID, nil
	case *kmsg.TxnOffsetCommitRequest:
		return r.TransactionalID, []string{r.Group}
	case *kmsg.FindCoordinatorRequest:
		keys := append([]string{r.CoordinatorKey}, r.CoordinatorKeys...)
		if r.CoordinatorType == 1 {
			return strings.Join(keys, ","), nil
		}
		return "", keys
	case *kmsg.OffsetFetchRequest:
		groups := []string{r.Group}
		for _, g := range r.Groups {
			groups = append(groups, g.Group)
		}
		return "", groups
	case *kmsg.OffsetCommitRequest:
		return "", []string{r.Group}
	case *kmsg.JoinGroupRequest:
		return "", []string{r.Group}
	case *kmsg.SyncGroupRequest:
		return "", []string{r.Group}
	case *kmsg.HeartbeatRequest:
		return "", []string{r.Group}
	case *kmsg.LeaveGroupRequest:
		return "", []string{r.Group}
	}
	return "", nil
}

// rules is the proxy's rule set, each rule with its effects and the requests it holds.
type rules struct {
	mu    sync.Mutex
	order []string
	byID  map[string]*ruleState
}

type ruleState struct {
	Rule
	effects Effects
	held    []*hold
	events  []Event
}

// Event is one moment of a hold: when the request was held, its client closed, it was
// delivered alone, and its late answer came (with the answer's error code where kmsg reads
// one), so a fault can say when a stale request landed and what the broker made of it.
type Event struct {
	AtMs        int64  `json:"at_ms"`
	Kind        string `json:"kind"`
	Lane        string `json:"lane"`
	Correlation int32  `json:"correlation"`
	ErrorCode   *int16 `json:"error_code,omitempty"`
}

// maxEvents bounds a rule's event list; a rule matching without limit counts on regardless.
const maxEvents = 1000

func (rs *rules) note(s *ruleState, e Event) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if len(s.events) < maxEvents {
		e.AtMs = time.Now().UnixMilli()
		s.events = append(s.events, e)
	}
}

func newRules() *rules { return &rules{byID: map[string]*ruleState{}} }

func (rs *rules) add(r Rule) error {
	if err := r.validate(); err != nil {
		return err
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if _, ok := rs.byID[r.ID]; ok {
		return fmt.Errorf("rule %q exists; remove it first", r.ID)
	}
	rs.byID[r.ID] = &ruleState{Rule: r}
	rs.order = append(rs.order, r.ID)
	return nil
}

// match returns the first rule that acts on the request of `h` on `lane`, counting it; nil
// for none. A request is decoded only when a rule's API matches and the rule needs its body.
func (rs *rules) match(lane string, h header) (*ruleState, kmsg.Request) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	var req kmsg.Request
	decoded := false
	for _, id := range rs.order {
		s := rs.byID[id]
		if s.APIKey != h.key || !s.onLane(lane) || !strings.HasPrefix(h.clientID, s.ClientID) {
			continue
		}
		if s.Limit > 0 && s.effects.Matched >= s.Limit {
			continue
		}
		if s.needsBody() || s.Action == actionAnswer {
			if !decoded {
				req, decoded = h.decode(), true
			}
			if req == nil {
				s.effects.Skipped++
				continue
			}
			if !s.matchesBody(req) {
				continue
			}
		}
		s.effects.Matched++
		return s, req
	}
	return nil, nil
}

// count applies `f` to a rule's effects under the lock.
func (rs *rules) count(s *ruleState, f func(*Effects)) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	f(&s.effects)
}

func (rs *rules) keep(s *ruleState, h *hold) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	s.held = append(s.held, h)
}

// remove drops a rule; what it holds is released when `release` is set, else discarded.
func (rs *rules) remove(id string, release bool) error {
	rs.mu.Lock()
	s, ok := rs.byID[id]
	if ok {
		delete(rs.byID, id)
		for i, o := range rs.order {
			if o == id {
				rs.order = append(rs.order[:i], rs.order[i+1:]...)
				break
			}
		}
	}
	held := s.takeHeld()
	rs.mu.Unlock()
	if !ok {
		return fmt.Errorf("no rule %q", id)
	}
	for _, h := range held {
		h.end(release)
	}
	return nil
}

// release delivers everything a rule holds now.
func (rs *rules) release(id string) error {
	rs.mu.Lock()
	s, ok := rs.byID[id]
	var held []*hold
	if ok {
		held = s.takeHeld()
	}
	rs.mu.Unlock()
	if !ok {
		return fmt.Errorf("no rule %q", id)
	}
	for _, h := range held {
		h.end(true)
	}
	return nil
}

func (s *ruleState) takeHeld() []*hold {
	if s == nil {
		return nil
	}
	held := s.held
	s.held = nil
	return held
}

// forget drops a hold that ended by itself (its timer) from its rule's list.
func (rs *rules) forget(s *ruleState, h *hold) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for i, o := range s.held {
		if o == h {
			s.held = append(s.held[:i], s.held[i+1:]...)
			return
		}
	}
}

// RuleView is a rule as the API shows it.
type RuleView struct {
	Rule
	Effects Effects `json:"effects"`
	Holding int     `json:"holding"`
	Events  []Event `json:"events"`
}

func (rs *rules) views() []RuleView {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	out := make([]RuleView, 0, len(rs.order))
	for _, id := range rs.order {
		s := rs.byID[id]
		events := append([]Event{}, s.events...)
		out = append(out, RuleView{Rule: s.Rule, Effects: s.effects, Holding: len(s.held), Events: events})
	}
	return out
}

func (rs *rules) reset() {
	rs.mu.Lock()
	ids := append([]string(nil), rs.order...)
	rs.mu.Unlock()
	for _, id := range ids {
		_ = rs.remove(id, false)
	}
}
