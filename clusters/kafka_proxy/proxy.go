package main

import (
	"log"
	"net"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// How long a request delivered alone, after its client closed, may take to be answered.
const aloneTimeout = 60 * time.Second

// lane is one listening address in front of one broker listener.
type lane struct {
	name     string
	listen   net.Listener
	upstream string
	rules    *rules
}

func (l *lane) serve() {
	for {
		client, err := l.listen.Accept()
		if err != nil {
			return
		}
		go l.open(client)
	}
}

func (l *lane) open(client net.Conn) {
	upstream, err := net.DialTimeout("tcp", l.upstream, 10*time.Second)
	if err != nil {
		log.Printf("lane %s: %v", l.name, err)
		client.Close()
		return
	}
	c := &conn{lane: l, client: client, upstream: upstream}
	go c.answers()
	c.requests()
}

// expectation is what the client gets for one request it sent, in the order it sent them:
// the broker's answer (passed on, or dropped), or one the proxy made.
type expectation struct {
	answer []byte // made by the proxy: sent as soon as every earlier answer was
	drop   bool
	mute   bool // drop this answer and every later one
}

// conn is one client connection and its own upstream connection to the broker. The broker
// answers a connection's requests in order, so the answers match the expectations in order.
type conn struct {
	lane     *lane
	client   net.Conn
	upstream net.Conn

	// the request side: what is sent upstream, in order, and the hold the connection is in
	sending    sync.Mutex
	held       *hold
	clientGone bool

	// the answer side
	mu      sync.Mutex
	pending []expectation
	muted   bool
}

// requests reads the client's requests and acts on each, until the client closes.
func (c *conn) requests() {
	for {
		frame, err := readFrame(c.client)
		if err != nil {
			break
		}
		c.sending.Lock()
		if c.held != nil {
			c.held.frames = append(c.held.frames, frame)
		} else {
			c.act(frame)
		}
		c.sending.Unlock()
	}
	c.sending.Lock()
	c.clientGone = true
	hd := c.held
	c.sending.Unlock()
	if hd != nil {
		hd.clientClosed()
	}
	c.upstream.Close()
	c.client.Close()
}

// act sends a request on, or does what the first matching rule says. Called with `sending`.
func (c *conn) act(frame []byte) {
	h, err := parseHeader(frame)
	if err != nil {
		c.plain(frame)
		return
	}
	s, req := c.lane.rules.match(c.lane.name, h)
	if s == nil {
		c.forward(frame, expectation{}, c.answered(h, nil))
		return
	}
	rs := c.lane.rules
	switch s.Action {
	case actionHold, actionDropRequest:
		hd := &hold{
			conn:        c,
			rule:        s,
			frames:      [][]byte{frame},
			correlation: h.correlation,
			never:       s.Action == actionDropRequest,
		}
		c.held = hd
		rs.keep(s, hd)
		rs.note(s, Event{Kind: "held", Lane: c.lane.name, Correlation: h.correlation})
		if hd.never {
			rs.count(s, func(e *Effects) { e.DroppedRequests++ })
		} else {
			rs.count(s, func(e *Effects) { e.Held++ })
			if s.HoldMs > 0 {
				hd.timer = time.AfterFunc(time.Duration(s.HoldMs)*time.Millisecond, func() {
					rs.forget(s, hd)
					hd.end(true)
				})
			}
		}
	// Each effect is counted before the client can see it: a client that has its answer and
	// then asks for the rule's effects must find them counted.
	case actionDropResponse:
		answered := c.answered(h, req)
		if answered {
			rs.count(s, func(e *Effects) { e.DroppedResponses++ })
		} else {
			rs.count(s, func(e *Effects) { e.Skipped++ })
		}
		c.forward(frame, expectation{drop: true, mute: true}, answered)
	case actionDuplicate:
		answered := c.answered(h, req)
		rs.count(s, func(e *Effects) { e.Duplicated++ })
		c.forward(frame, expectation{}, answered)
		c.forward(frame, expectation{drop: true}, answered)
	case actionAnswer:
		resp := answer(req, s.ErrorCode)
		switch {
		case resp == nil:
			rs.count(s, func(e *Effects) { e.Skipped++ })
			c.forward(frame, expectation{}, c.answered(h, req))
		case !c.answered(h, req): // acks=0: the client awaits nothing, so nothing is sent
			rs.count(s, func(e *Effects) { e.DroppedRequests++ })
		default:
			rs.count(s, func(e *Effects) { e.Answered++ })
			c.expect(expectation{answer: responseFrame(h, resp)})
		}
	}
}

// plain sends a request on as it is, whatever the rules say.
func (c *conn) plain(frame []byte) {
	h, err := parseHeader(frame)
	c.forward(frame, expectation{}, err != nil || c.answered(h, nil))
}

// answered says whether the broker answers the request (all but a Produce with acks=0).
func (c *conn) answered(h header, req kmsg.Request) bool {
	if h.key != 0 {
		return true
	}
	if req == nil {
		req = h.decode()
	}
	return req == nil || expectsResponse(h, req)
}

// forward sends a request upstream, first noting what the client gets for it. Called with
// `sending`, so the expectations and the requests keep one order.
func (c *conn) forward(frame []byte, e expectation, answered bool) {
	if answered {
		c.expect(e)
	}
	if _, err := c.upstream.Write(frame); err != nil {
		c.upstream.Close()
	}
}

func (c *conn) expect(e expectation) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pending = append(c.pending, e)
	c.flush()
}

// flush sends the proxy's own answers that no broker answer precedes. Called with `mu`.
func (c *conn) flush() {
	for len(c.pending) > 0 && c.pending[0].answer != nil {
		if !c.muted {
			if _, err := c.client.Write(c.pending[0].answer); err != nil {
				c.client.Close()
			}
		}
		c.pending = c.pending[1:]
	}
}

// answers passes the broker's answers to the client, as the expectations say.
func (c *conn) answers() {
	defer c.client.Close()
	for {
		frame, err := readFrame(c.upstream)
		if err != nil {
			return
		}
		c.mu.Lock()
		send := !c.muted
		if len(c.pending) > 0 {
			e := c.pending[0]
			c.pending = c.pending[1:]
			if e.mute {
				c.muted = true
			}
			send = send && !e.drop && !e.mute
		}
		if send {
			if _, err := c.client.Write(frame); err != nil {
				c.mu.Unlock()
				return
			}
		}
		c.flush()
		c.mu.Unlock()
	}
}

// hold is a connection's stalled requests: the one a rule matched first, then what the
// client sent after it on the same connection.
type hold struct {
	conn        *conn
	rule        *ruleState
	frames      [][]byte
	correlation int32
	never       bool // drop-request: never delivered
	timer       *time.Timer
	once        sync.Once
}

// clientClosed notes that the held request's client gave up on it, and releases it when the
// rule says so.
func (h *hold) clientClosed() {
	rs := h.conn.lane.rules
	rs.note(h.rule, Event{Kind: "client-closed", Lane: h.conn.lane.name, Correlation: h.correlation})
	if after := h.rule.ReleaseAfterCloseMs; after != nil && !h.never {
		time.AfterFunc(time.Duration(*after)*time.Millisecond, func() {
			rs.forget(h.rule, h)
			h.end(true)
		})
	}
}

// end releases the hold: with `deliver` (and not a dropped request), the client, if still
// there, sees a stall end; if gone, the held request reaches the broker alone, late. Else
// the requests are lost and a client still waiting is disconnected.
func (h *hold) end(deliver bool) {
	h.once.Do(func() {
		if h.timer != nil {
			h.timer.Stop()
		}
		c, rs := h.conn, h.conn.lane.rules
		c.sending.Lock()
		frames := h.frames
		h.frames = nil
		if c.held == h {
			c.held = nil
		}
		gone := c.clientGone
		switch {
		case h.never || !deliver:
			if h.never {
				rs.count(h.rule, func(e *Effects) { e.Discarded += int64(len(frames) - 1) })
			} else {
				rs.count(h.rule, func(e *Effects) { e.Discarded += int64(len(frames)) })
			}
			c.client.Close()
		case !gone:
			rs.count(h.rule, func(e *Effects) { e.Released++ })
			c.plain(frames[0])
			for i, frame := range frames[1:] {
				if c.held != nil { // a later request began a hold of its own
					c.held.frames = append(c.held.frames, frames[1+i:]...)
					break
				}
				c.act(frame)
			}
		default:
			rs.count(h.rule, func(e *Effects) {
				e.Released++
				e.ReleasedAlone++
				e.Discarded += int64(len(frames) - 1)
			})
			go h.deliverAlone(frames[0])
		}
		c.sending.Unlock()
	})
}

// deliverAlone sends the held request on a connection of its own and reads its answer,
// which nobody awaits any more but which says what the broker made of the request.
func (h *hold) deliverAlone(frame []byte) {
	l, rs := h.conn.lane, h.conn.lane.rules
	fail := func(err error) { log.Printf("lane %s: a held request was not delivered: %v", l.name, err) }
	upstream, err := net.DialTimeout("tcp", l.upstream, 10*time.Second)
	if err != nil {
		fail(err)
		return
	}
	defer upstream.Close()
	_ = upstream.SetDeadline(time.Now().Add(aloneTimeout))
	if _, err := upstream.Write(frame); err != nil {
		fail(err)
		return
	}
	rs.note(h.rule, Event{Kind: "delivered-alone", Lane: l.name, Correlation: h.correlation})
	hd, err := parseHeader(frame)
	if err != nil || !expectsResponse(hd, hd.decode()) {
		return
	}
	answer, err := readFrame(upstream)
	if err != nil {
		log.Printf("lane %s: a held request's late answer: %v", l.name, err)
		return
	}
	rs.note(h.rule, Event{Kind: "answer", Lane: l.name, Correlation: h.correlation, ErrorCode: errorCode(hd, answer)})
}

// errorCode reads the error code of an answer to a request of `h`, for the APIs whose answer
// carries one for the whole request; nil for the others.
func errorCode(h header, frame []byte) *int16 {
	resp := kmsg.ResponseForKey(h.key)
	if resp == nil {
		return nil
	}
	resp.SetVersion(h.version)
	body := frame[8:]
	if resp.IsFlexible() && h.key != apiVersionsKey {
		rest, err := skipTags(body)
		if err != nil {
			return nil
		}
		body = rest
	}
	if resp.ReadFrom(body) != nil {
		return nil
	}
	var code int16
	switch r := resp.(type) {
	case *kmsg.EndTxnResponse:
		code = r.ErrorCode
	case *kmsg.AddOffsetsToTxnResponse:
		code = r.ErrorCode
	case *kmsg.InitProducerIDResponse:
		code = r.ErrorCode
	case *kmsg.HeartbeatResponse:
		code = r.ErrorCode
	default:
		return nil
	}
	return &code
}
