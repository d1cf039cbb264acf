module eoschaos/kafkaproxy

go 1.26.0

require github.com/twmb/franz-go/pkg/kmsg v1.15.1
