package kafkasec

import (
	"github.com/IBM/sarama"
	"github.com/xdg-go/scram"
)

// SCRAM (RFC 5802) goes through github.com/xdg-go/scram, the client sarama's
// own examples use: it does SASLprep of the credentials and verifies the
// server's signature, which a hand-written exchange would have to get
// right too.

var (
	sha256Hash = scram.SHA256
	sha512Hash = scram.SHA512
)

// scramClient adapts a scram conversation to sarama.SCRAMClient.
type scramClient struct {
	hash scram.HashGeneratorFcn
	conv *scram.ClientConversation
}

func newSCRAMClient(h scram.HashGeneratorFcn) func() sarama.SCRAMClient {
	return func() sarama.SCRAMClient { return &scramClient{hash: h} }
}

func (c *scramClient) Begin(user, password, authzID string) error {
	client, err := c.hash.NewClient(user, password, authzID)
	if err != nil {
		// The error says which SASLprep rule failed, not the text.
		return err
	}
	c.conv = client.NewConversation()
	return nil
}

func (c *scramClient) Step(challenge string) (string, error) { return c.conv.Step(challenge) }

func (c *scramClient) Done() bool { return c.conv.Done() }
