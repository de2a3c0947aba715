package consumer

import "sync"

// task is one key's run: an event and the partition it belongs to.
type task struct {
	p  *partition
	it item
}

// executor runs key runs on reusable goroutines. A fresh goroutine starts
// with a small stack that grows (by copying) as it descends through the
// middleware chain, which on a busy consumer cost more than the handlers:
// an idle worker that already has its stack takes the task instead, and a
// new goroutine is started only when none is idle. Workers live until the
// consumer stops; their number is bounded by how many keys can run at once
// (partitions × max_uncommitted).
type executor struct {
	tasks chan task // unbuffered: a send succeeds only into an idle worker
	wg    sync.WaitGroup
}

func newExecutor() *executor { return &executor{tasks: make(chan task)} }

func (e *executor) submit(t task) {
	select {
	case e.tasks <- t:
	default:
		e.wg.Add(1)
		go e.work(t)
	}
}

func (e *executor) work(t task) {
	defer e.wg.Done()
	for ok := true; ok; t, ok = <-e.tasks {
		t.p.run(t.it)
	}
}

// close ends idle workers; busy ones end when their run returns. It must be
// called only after every partition has drained, when nothing submits.
func (e *executor) close() { close(e.tasks) }
