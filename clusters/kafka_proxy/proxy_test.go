package main

import (
	"encoding/binary"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// broker is a stand-in for a Kafka broker, enough to test the proxy's framing: it answers
// every request, in order, with its API's empty response, and records what it received.
type broker struct {
	listener net.Listener
	mu       sync.Mutex
	received []received
	conns    int
}

type received struct {
	conn        int
	key         int16
	correlation int32
}

func newBroker(t *testing.T) *broker {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &broker{listener: l}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			b.mu.Lock()
			b.conns++
			n := b.conns
			b.mu.Unlock()
			go b.serve(n, c)
		}
	}()
	return b
}

func (b *broker) serve(n int, c net.Conn) {
	defer c.Close()
	for {
		frame, err := readFrame(c)
		if err != nil {
			return
		}
		h, err := parseHeader(frame)
		if err != nil {
			return
		}
		b.mu.Lock()
		b.received = append(b.received, received{n, h.key, h.correlation})
		b.mu.Unlock()
		req := h.decode()
		if !expectsResponse(h, req) {
			continue
		}
		resp := req.ResponseKind()
		resp.SetVersion(h.version)
		if _, err := c.Write(responseFrame(h, resp)); err != nil {
			return
		}
	}
}

func (b *broker) seen() []received {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]received(nil), b.received...)
}

// waitSeen waits until the broker received `n` requests.
func (b *broker) waitSeen(t *testing.T, n int) []received {
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if got := b.seen(); len(got) >= n {
			return got
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("the broker received %v, not %d requests", b.seen(), n)
	return nil
}

func startProxy(t *testing.T, b *broker, rules ...Rule) (*server, string) {
	s := &server{rules: newRules(), lanes: map[string]*lane{}}
	for _, r := range rules {
		if err := s.rules.add(r); err != nil {
			t.Fatal(err)
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := &lane{name: "lane-1", listen: l, upstream: b.listener.Addr().String(), rules: s.rules}
	go ln.serve()
	t.Cleanup(func() { l.Close() })
	return s, l.Addr().String()
}

func dial(t *testing.T, addr string) net.Conn {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func send(t *testing.T, c net.Conn, correlation int32, req kmsg.Request) {
	frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("test-client")).
		AppendRequest(nil, req, correlation)
	if _, err := c.Write(frame); err != nil {
		t.Fatal(err)
	}
}

// answerTo reads the next answer and returns its correlation id and body.
func answerTo(t *testing.T, c net.Conn) (int32, []byte) {
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	frame, err := readFrame(c)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	return int32(binary.BigEndian.Uint32(frame[4:])), frame[8:]
}

func noAnswer(t *testing.T, c net.Conn, within time.Duration) {
	_ = c.SetReadDeadline(time.Now().Add(within))
	if frame, err := readFrame(c); err == nil {
		t.Fatalf("an answer came: correlation %d", int32(binary.BigEndian.Uint32(frame[4:])))
	}
}

func endTxn(id string) *kmsg.EndTxnRequest {
	req := kmsg.NewPtrEndTxnRequest()
	req.Version, req.TransactionalID, req.Commit = 3, id, true
	return req
}

func heartbeat() *kmsg.HeartbeatRequest {
	req := kmsg.NewPtrHeartbeatRequest()
	req.Version, req.Group = 4, "g"
	return req
}

func effects(s *server, id string) Effects {
	for _, v := range s.rules.views() {
		if v.ID == id {
			return v.Effects
		}
	}
	return Effects{}
}

func TestRequestsAndAnswersPassThroughInOrderWithoutRules(t *testing.T) {
	b := newBroker(t)
	_, addr := startProxy(t, b)
	c := dial(t, addr)
	send(t, c, 1, heartbeat())
	send(t, c, 2, endTxn("t1"))
	for _, want := range []int32{1, 2} {
		if got, _ := answerTo(t, c); got != want {
			t.Fatalf("answer %d, want %d", got, want)
		}
	}
}

func TestAnsweredRequestNeverReachesTheBrokerAndCarriesTheCode(t *testing.T) {
	b := newBroker(t)
	s, addr := startProxy(t, b, Rule{ID: "r", APIKey: 26, TransactionalID: "t1", Action: actionAnswer, ErrorCode: 51})
	c := dial(t, addr)
	send(t, c, 1, heartbeat())
	send(t, c, 2, endTxn("t1"))
	send(t, c, 3, endTxn("t2")) // another id: not matched
	if got, _ := answerTo(t, c); got != 1 {
		t.Fatalf("first answer %d", got)
	}
	got, body := answerTo(t, c)
	resp := kmsg.NewPtrEndTxnResponse()
	resp.Version = 3
	// the body follows the response header's tagged fields (EndTxn v3 is flexible)
	if err := resp.ReadFrom(body[1:]); err != nil || got != 2 || resp.ErrorCode != 51 {
		t.Fatalf("answer %d code %d (%v)", got, resp.ErrorCode, err)
	}
	if got, _ := answerTo(t, c); got != 3 {
		t.Fatalf("third answer %d", got)
	}
	for _, r := range b.waitSeen(t, 2) {
		if r.correlation == 2 {
			t.Fatalf("the broker saw the answered request")
		}
	}
	if e := effects(s, "r"); e.Matched != 1 || e.Answered != 1 {
		t.Fatalf("effects %+v", e)
	}
}

func TestUnstableOffsetCommitIsAnsweredOnlyToFetchesThatAskForStableOffsets(t *testing.T) {
	b := newBroker(t)
	s, addr := startProxy(t, b, Rule{ID: "r", APIKey: 9, Group: "g", Action: actionAnswer, ErrorCode: unstableOffsetCommit})
	c := dial(t, addr)
	for _, correlation := range []int32{1, 2} {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Version, req.Group, req.RequireStable = 7, "g", correlation == 2
		send(t, c, correlation, req)
		if got, _ := answerTo(t, c); got != correlation {
			t.Fatalf("answer %d, want %d", got, correlation)
		}
	}
	if seen := b.waitSeen(t, 1); len(seen) != 1 || seen[0].correlation != 1 {
		t.Fatalf("the broker saw %v, want only the fetch without require_stable", seen)
	}
	if e := effects(s, "r"); e.Matched != 1 || e.Answered != 1 {
		t.Fatalf("effects %+v", e)
	}
}

func TestDuplicatedRequestReachesTheBrokerTwiceAndIsAnsweredOnce(t *testing.T) {
	b := newBroker(t)
	s, addr := startProxy(t, b, Rule{ID: "r", APIKey: 26, Action: actionDuplicate, Limit: 1})
	c := dial(t, addr)
	send(t, c, 1, endTxn("t1"))
	send(t, c, 2, endTxn("t1"))
	for _, want := range []int32{1, 2} {
		if got, _ := answerTo(t, c); got != want {
			t.Fatalf("answer %d, want %d", got, want)
		}
	}
	seen := b.waitSeen(t, 3)
	if seen[0].correlation != 1 || seen[1].correlation != 1 || seen[2].correlation != 2 {
		t.Fatalf("the broker saw %v", seen)
	}
	if e := effects(s, "r"); e.Duplicated != 1 {
		t.Fatalf("effects %+v", e)
	}
}

func TestDroppedResponseSilencesTheConnectionFromThatRequestOn(t *testing.T) {
	b := newBroker(t)
	s, addr := startProxy(t, b, Rule{ID: "r", APIKey: 26, Action: actionDropResponse, Limit: 1})
	c := dial(t, addr)
	send(t, c, 1, heartbeat())
	send(t, c, 2, endTxn("t1"))
	send(t, c, 3, heartbeat())
	if got, _ := answerTo(t, c); got != 1 {
		t.Fatalf("first answer %d", got)
	}
	noAnswer(t, c, 300*time.Millisecond)
	b.waitSeen(t, 3) // the broker did get all three
	if e := effects(s, "r"); e.DroppedResponses != 1 {
		t.Fatalf("effects %+v", e)
	}
}

func TestHeldRequestReachesTheBrokerAloneAfterItsClientClosed(t *testing.T) {
	b := newBroker(t)
	s, addr := startProxy(t, b, Rule{ID: "r", APIKey: 26, Action: actionHold})
	c := dial(t, addr)
	send(t, c, 1, endTxn("t1"))
	send(t, c, 2, heartbeat()) // behind the held one: lost with the connection
	noAnswer(t, c, 200*time.Millisecond)
	if len(b.seen()) != 0 {
		t.Fatalf("the broker saw %v while the request was held", b.seen())
	}
	c.Close()
	time.Sleep(100 * time.Millisecond) // the proxy sees the close
	if err := s.rules.release("r"); err != nil {
		t.Fatal(err)
	}
	seen := b.waitSeen(t, 1)
	time.Sleep(100 * time.Millisecond)
	seen = b.seen()
	if len(seen) != 1 || seen[0].correlation != 1 || seen[0].conn != 2 {
		t.Fatalf("the broker saw %v; want the held request alone on a second connection", seen)
	}
	e := effects(s, "r")
	if e.Held != 1 || e.ReleasedAlone != 1 || e.Discarded != 1 {
		t.Fatalf("effects %+v", e)
	}
}

func TestHeldRequestReleasedWhileItsClientWaitsEndsTheStallInOrder(t *testing.T) {
	b := newBroker(t)
	s, addr := startProxy(t, b, Rule{ID: "r", APIKey: 26, Action: actionHold, HoldMs: 200, Limit: 1})
	c := dial(t, addr)
	started := time.Now()
	send(t, c, 1, endTxn("t1"))
	send(t, c, 2, heartbeat())
	for _, want := range []int32{1, 2} {
		if got, _ := answerTo(t, c); got != want {
			t.Fatalf("answer %d, want %d", got, want)
		}
	}
	if waited := time.Since(started); waited < 200*time.Millisecond {
		t.Fatalf("answered after %v, before the hold ended", waited)
	}
	if e := effects(s, "r"); e.Held != 1 || e.Released != 1 || e.ReleasedAlone != 0 {
		t.Fatalf("effects %+v", e)
	}
}

func TestDroppedRequestIsNeverDelivered(t *testing.T) {
	b := newBroker(t)
	s, addr := startProxy(t, b, Rule{ID: "r", APIKey: 26, Action: actionDropRequest})
	c := dial(t, addr)
	send(t, c, 1, endTxn("t1"))
	noAnswer(t, c, 200*time.Millisecond)
	c.Close()
	if err := s.rules.remove("r", true); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if len(b.seen()) != 0 {
		t.Fatalf("the broker saw %v", b.seen())
	}
}

func TestRuleThatCannotBeAnsweredIsRefused(t *testing.T) {
	if err := newRules().add(Rule{ID: "r", APIKey: 3, Action: actionAnswer, ErrorCode: 1}); err == nil {
		t.Fatal("a Metadata answer was accepted")
	}
}

func TestEveryAnswerableAPIIsAnsweredAtEveryVersionWithTheCode(t *testing.T) {
	for _, key := range answerableKeys() {
		req := kmsg.RequestForKey(int16(key))
		for version := int16(0); version <= req.MaxVersion(); version++ {
			req.SetVersion(version)
			resp := answer(req, 16)
			if resp == nil || resp.GetVersion() != version {
				t.Fatalf("%s v%d: no answer", kmsg.NameForKey(int16(key)), version)
			}
			decoded := resp.RequestKind().ResponseKind()
			decoded.SetVersion(version)
			if err := decoded.ReadFrom(resp.AppendTo(nil)); err != nil {
				t.Fatalf("%s v%d: the answer does not decode: %v", kmsg.NameForKey(int16(key)), version, err)
			}
		}
	}
}
