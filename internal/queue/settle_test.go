package queue

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluicehq/sluice/internal/enginetest"
	"github.com/sluicehq/sluice/internal/notify"
)

// TestTakenOverPartitionKeepsOrder replays the hand-over history that
// reordered one user's jobs (TestPartitionsSpread, about 1 run in 8 under
// load): the server sent a user's first job to a node's pull request that
// nobody read any more (the node had stopped pulling the partition), so
// the job counted as out to that node, which, holding nothing, unpinned
// the partition. The next owner was then sent the user's second job at
// once, and the first came back only after its ack wait, behind it. The
// same history follows a node killed or frozen with a job in hand. The
// next owner now holds what it receives until nothing is out elsewhere,
// then runs the jobs in stream order.
func TestTakenOverPartitionKeepsOrder(t *testing.T) {
	t.Parallel()
	srv := enginetest.StartNATSCluster(t, 1)
	prefix := "S" + strings.ToUpper(t.Name()[4:8]) + "_"
	k := streamKey{notify.Webhook, notify.Critical}
	q := notifyQueue(t, open(t, Options{URL: srv.URL(), StreamPrefix: prefix}),
		NotifyOptions{Partitions: 1, AckWait: 2 * time.Second, Workers: map[notify.Category]int{notify.Critical: 2}})
	l := q.lanes[k]
	if l.consumers[0].PriorityPolicy != jetstream.PriorityPolicyPinned {
		t.Fatalf("the partition consumer is not pinned (server too old?): %+v", l.consumers[0])
	}
	job := func(id string) notify.Job {
		return notify.Job{NotificationID: id, Channel: k.ch, UserID: "u", Category: k.cat}
	}
	publish := func(j notify.Job) {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		if err := q.Publish(ctx, j); err != nil {
			t.Fatal(err)
		}
		if err := q.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}

	// The old owner: one pull request of the pin group receives the
	// user's first job, which nobody will ever handle or acknowledge.
	publish(job("first"))
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	cons, err := l.str.Consumer(ctx, l.consumers[0].Durable)
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(1, jetstream.FetchPriorityGroup(pinGroup), jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var lost int
	for range batch.Messages() {
		lost++
	}
	if lost != 1 {
		t.Fatalf("the old owner's pull received %d jobs, want the first (err %v)", lost, batch.Error())
	}
	// Holding nothing, it unpins; the user's second job follows.
	if err := l.str.UnpinConsumer(ctx, l.consumers[0].Durable, pinGroup); err != nil {
		t.Fatal(err)
	}
	publish(job("second"))

	log := newOrderLog()
	runQueue(t, q, log.handler("next", 0))
	enginetest.Eventually(t, 3*l.consumers[0].AckWait+10*time.Second, "both jobs handled", func() bool { return log.count() >= 2 })
	log.check(t, map[string][]string{"u": {"first", "second"}})
}
