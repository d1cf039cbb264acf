// Command kafka-proxy is eoschaos' Kafka-protocol-aware proxy: it stands between the clients'
// Toxiproxy lanes and the brokers, passes every request and answer through as it is, and, for
// the requests a rule matches (by API, client id, transactional id, group), holds, drops,
// duplicates or answers them itself. Rules and lanes are set over a small HTTP API on loopback;
// each rule counts what it did, which is the fault's observed effect.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"sort"
	"sync"
)

const version = "1"

type server struct {
	rules *rules
	mu    sync.Mutex
	lanes map[string]*lane
}

// LaneSpec is a lane as the API takes and shows it.
type LaneSpec struct {
	Name     string `json:"name"`
	Listen   string `json:"listen"`
	Upstream string `json:"upstream"`
}

func main() {
	api := flag.String("api", "127.0.0.1:0", "address of the HTTP API")
	flag.Parse()
	s := &server{rules: newRules(), lanes: map[string]*lane{}}
	listener, err := net.Listen("tcp", *api)
	if err != nil {
		log.Fatalf("kafka-proxy: %v", err)
	}
	log.Printf("kafka-proxy %s: API on %s", version, listener.Addr())
	log.Fatal(http.Serve(listener, s.routes()))
}

func (s *server) routes() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /version", func(w http.ResponseWriter, _ *http.Request) {
		reply(w, map[string]string{"version": version})
	})
	mux.HandleFunc("POST /lanes", s.addLane)
	mux.HandleFunc("GET /lanes", s.showLanes)
	mux.HandleFunc("POST /rules", s.addRule)
	mux.HandleFunc("GET /rules", func(w http.ResponseWriter, _ *http.Request) {
		reply(w, s.rules.views())
	})
	mux.HandleFunc("DELETE /rules", func(w http.ResponseWriter, _ *http.Request) {
		s.rules.reset()
		reply(w, map[string]bool{"reset": true})
	})
	mux.HandleFunc("DELETE /rules/{id}", func(w http.ResponseWriter, r *http.Request) {
		err := s.rules.remove(r.PathValue("id"), r.URL.Query().Get("release") == "true")
		replyOr(w, err, http.StatusNotFound)
	})
	mux.HandleFunc("POST /rules/{id}/release", func(w http.ResponseWriter, r *http.Request) {
		replyOr(w, s.rules.release(r.PathValue("id")), http.StatusNotFound)
	})
	return mux
}

func (s *server) addLane(w http.ResponseWriter, r *http.Request) {
	var spec LaneSpec
	if err := json.NewDecoder(r.Body).Decode(&spec); err != nil || spec.Name == "" {
		http.Error(w, fmt.Sprintf("a lane needs name, listen and upstream (%v)", err), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.lanes[spec.Name]; ok {
		http.Error(w, fmt.Sprintf("lane %q exists", spec.Name), http.StatusConflict)
		return
	}
	listener, err := net.Listen("tcp", spec.Listen)
	if err != nil {
		http.Error(w, err.Error(), http.StatusConflict)
		return
	}
	l := &lane{name: spec.Name, listen: listener, upstream: spec.Upstream, rules: s.rules}
	s.lanes[spec.Name] = l
	go l.serve()
	reply(w, LaneSpec{Name: l.name, Listen: listener.Addr().String(), Upstream: l.upstream})
}

func (s *server) showLanes(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]LaneSpec, 0, len(s.lanes))
	for _, l := range s.lanes {
		out = append(out, LaneSpec{Name: l.name, Listen: l.listen.Addr().String(), Upstream: l.upstream})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	reply(w, out)
}

func (s *server) addRule(w http.ResponseWriter, r *http.Request) {
	var rule Rule
	if err := json.NewDecoder(r.Body).Decode(&rule); err != nil {
		http.Error(w, "a rule must be JSON: "+err.Error(), http.StatusBadRequest)
		return
	}
	if err := s.rules.add(rule); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	reply(w, rule)
}

func reply(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func replyOr(w http.ResponseWriter, err error, status int) {
	if err != nil {
		http.Error(w, err.Error(), status)
		return
	}
	reply(w, map[string]bool{"ok": true})
}
