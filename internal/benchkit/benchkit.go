// Package benchkit holds what the benchmark programs share: filling a
// topic the way Prosody's producer writes it, unique names, and medians.
package benchkit

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"os"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"

	"github.com/prosody-events/prosody-go/core/mockbroker"
)

// SaramaConfig is a sarama configuration for the protocol version Prosody
// uses.
func SaramaConfig() *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.Version = mockbroker.KafkaVersion
	return cfg
}

// Fill creates topic with the given partitions and writes n JSON messages
// of about size bytes over keys distinct keys, with an idempotent LZ4
// producer and the CRC-32 key partitioner, as Prosody's producer does.
// Message i has key key-%05d of i mod keys and carries its per-key
// sequence number.
func Fill(addrs []string, topic string, partitions int32, n, keys, size int) error {
	pad := strings.Repeat("x", max(0, size-110))
	return FillWith(addrs, topic, partitions, n, func(i int) (string, string) {
		k := fmt.Sprintf("key-%05d", i%keys)
		return k, fmt.Sprintf(`{"id":"evt-%09d","type":"bench.event","key":"%s","seq":%d,"pad":"%s"}`, i, k, i/keys, pad)
	})
}

// FillWith is Fill with the key and JSON value of message i given by
// message.
func FillWith(addrs []string, topic string, partitions int32, n int, message func(i int) (key, value string)) error {
	cfg := SaramaConfig()
	admin, err := sarama.NewClusterAdmin(addrs, cfg)
	if err != nil {
		return err
	}
	if err := admin.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: partitions, ReplicationFactor: 1}, false); err != nil {
		admin.Close()
		return err
	}
	admin.Close()
	time.Sleep(time.Second) // let leaders settle before the first batch

	p, closeProducer, err := AsyncProducer(addrs, ProducerConfig())
	if err != nil {
		return err
	}
	for i := 0; i < n; i++ {
		k, v := message(i)
		p.Input() <- &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(k), Value: sarama.StringEncoder(v)}
	}
	return closeProducer()
}

// ProducerConfig is a sarama configuration that produces as Prosody's
// producer does: idempotent, LZ4, the CRC-32 key partitioner.
func ProducerConfig() *sarama.Config {
	cfg := SaramaConfig()
	cfg.Producer.Idempotent = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Net.MaxOpenRequests = 1
	cfg.Producer.Compression = sarama.CompressionLZ4
	cfg.Producer.Return.Successes = false
	cfg.Producer.Flush.Bytes = 512 * 1024
	cfg.Producer.Flush.Frequency = 5 * time.Millisecond
	cfg.Producer.Partitioner = sarama.NewCustomPartitioner(sarama.WithAbsFirst(), sarama.WithCustomHashFunction(crc32.NewIEEE))
	return cfg
}

// AsyncProducer is a sarama async producer on addrs whose failures are
// counted: closing it (the returned func) waits for what is in flight and
// says how many messages failed.
func AsyncProducer(addrs []string, cfg *sarama.Config) (sarama.AsyncProducer, func() error, error) {
	p, err := sarama.NewAsyncProducer(addrs, cfg)
	if err != nil {
		return nil, nil, err
	}
	var failed atomic.Int64
	done := make(chan struct{})
	go func() {
		for range p.Errors() {
			failed.Add(1)
		}
		close(done)
	}()
	return p, func() error {
		p.AsyncClose()
		<-done
		if f := failed.Load(); f > 0 {
			return fmt.Errorf("%d messages failed to produce", f)
		}
		return nil
	}, nil
}

// Suffix is a short random hex string for unique topic, group and keyspace
// names.
func Suffix() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Median of xs (the upper one for an even count); 0 for none.
func Median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}

// Must ends the program with its name and err when err is not nil.
func Must(program string, err error) {
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", program, err)
		os.Exit(1)
	}
}
