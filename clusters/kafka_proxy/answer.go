package main

import (
	"reflect"
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The APIs the proxy can answer with an error of its own, each as its response carries errors:
// once for the request, or per group, coordinator key, topic and partition the request names.
var answerers = map[int16]func(kmsg.Request, int16) kmsg.Response{
	0:  answerProduce,
	8:  answerOffsetCommit,
	9:  answerOffsetFetch,
	10: answerFindCoordinator,
	11: answerWhole, // JoinGroup
	12: answerWhole, // Heartbeat
	14: answerWhole, // SyncGroup
	22: answerWhole, // InitProducerId
	24: answerAddPartitionsToTxn,
	25: answerWhole, // AddOffsetsToTxn
	26: answerWhole, // EndTxn
	28: answerTxnOffsetCommit,
}

// answerWhole answers a request whose response has one error for all of it (ErrorCode), and a
// producer id and epoch of -1 where the response carries them (InitProducerId, EndTxn).
func answerWhole(r kmsg.Request, code int16) kmsg.Response {
	resp := r.ResponseKind()
	fields := reflect.ValueOf(resp).Elem()
	fields.FieldByName("ErrorCode").SetInt(int64(code))
	for _, name := range []string{"ProducerID", "ProducerEpoch"} {
		if f := fields.FieldByName(name); f.IsValid() {
			f.SetInt(-1)
		}
	}
	return resp
}

func answerable(key int16) bool {
	_, ok := answerers[key]
	return ok
}

func answerableKeys() []int {
	keys := make([]int, 0, len(answerers))
	for k := range answerers {
		keys = append(keys, int(k))
	}
	sort.Ints(keys)
	return keys
}

// answer makes the response to `req` that carries `code`, at the request's version; nil
// where the request was not decoded or its API is not answerable.
func answer(req kmsg.Request, code int16) kmsg.Response {
	if req == nil {
		return nil
	}
	f, ok := answerers[req.Key()]
	if !ok {
		return nil
	}
	resp := f(req, code)
	resp.SetVersion(req.GetVersion())
	return resp
}

func answerProduce(r kmsg.Request, code int16) kmsg.Response {
	req := r.(*kmsg.ProduceRequest)
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewProduceResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewProduceResponseTopicPartition()
			rp.Partition, rp.ErrorCode, rp.BaseOffset = p.Partition, code, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

func answerOffsetCommit(r kmsg.Request, code int16) kmsg.Response {
	req := r.(*kmsg.OffsetCommitRequest)
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// unstableOffsetCommit is answered per partition, as the broker does while a transactional
// offset commit of the partition is pending; any other error is the group's.
const unstableOffsetCommit = 88

func answerOffsetFetch(r kmsg.Request, code int16) kmsg.Response {
	req := r.(*kmsg.OffsetFetchRequest)
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	partitionCode, groupCode := code, code
	if code == unstableOffsetCommit {
		groupCode = 0
	}
	if req.Version < 8 {
		resp.ErrorCode = groupCode
		for _, t := range req.Topics {
			rt := kmsg.NewOffsetFetchResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetFetchResponseTopicPartition()
				rp.Partition, rp.Offset, rp.LeaderEpoch, rp.ErrorCode = p, -1, -1, partitionCode
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	}
	for _, g := range req.Groups {
		rg := kmsg.NewOffsetFetchResponseGroup()
		rg.Group, rg.ErrorCode = g.Group, groupCode
		for _, t := range g.Topics {
			rt := kmsg.NewOffsetFetchResponseGroupTopic()
			rt.Topic, rt.TopicID = t.Topic, t.TopicID
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
				rp.Partition, rp.Offset, rp.LeaderEpoch, rp.ErrorCode = p, -1, -1, partitionCode
				rt.Partitions = append(rt.Partitions, rp)
			}
			rg.Topics = append(rg.Topics, rt)
		}
		resp.Groups = append(resp.Groups, rg)
	}
	return resp
}

func answerFindCoordinator(r kmsg.Request, code int16) kmsg.Response {
	req := r.(*kmsg.FindCoordinatorRequest)
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	resp.ErrorCode, resp.NodeID, resp.Port = code, -1, -1
	for _, key := range req.CoordinatorKeys {
		c := kmsg.NewFindCoordinatorResponseCoordinator()
		c.Key, c.NodeID, c.Port, c.ErrorCode = key, -1, -1, code
		resp.Coordinators = append(resp.Coordinators, c)
	}
	return resp
}

func answerAddPartitionsToTxn(r kmsg.Request, code int16) kmsg.Response {
	req := r.(*kmsg.AddPartitionsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	if req.Version >= 4 { // batched, from brokers: one error for the request
		resp.ErrorCode = code
		return resp
	}
	for _, t := range req.Topics {
		rt := kmsg.NewAddPartitionsToTxnResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

func answerTxnOffsetCommit(r kmsg.Request, code int16) kmsg.Response {
	req := r.(*kmsg.TxnOffsetCommitRequest)
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewTxnOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
