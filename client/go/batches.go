package werk

import (
	"context"
	"net/url"
)

// BatchHandle is an open batch inside Client.Batch or Client.InBatch: what is pushed through
// it joins the batch.
type BatchHandle struct {
	BID    string
	client *Client
}

// Push pushes one job into the batch.
func (b *BatchHandle) Push(ctx context.Context, spec JobSpec) (*Job, error) {
	spec.Batch = b.BID
	return b.client.Push(ctx, spec)
}

// PushMany pushes jobs into the batch.
func (b *BatchHandle) PushMany(ctx context.Context, specs []JobSpec) (*PushManyResult, error) {
	joined := make([]JobSpec, len(specs))
	for i, s := range specs {
		s.Batch = b.BID
		joined[i] = s
	}
	return b.client.PushMany(ctx, joined)
}

// Batch opens a child batch, a member of this one (settled in it when it finishes), calls fill
// with it and commits it, as Client.Batch does.
func (b *BatchHandle) Batch(ctx context.Context, spec BatchNew, fill func(*BatchHandle) error) (*BatchStatus, error) {
	spec.Parent = b.BID
	return b.client.Batch(ctx, spec, fill)
}

// Status is how the batch stands now.
func (b *BatchHandle) Status(ctx context.Context) (*BatchStatus, error) {
	return b.client.BatchStatus(ctx, b.BID)
}

// Batch opens a batch, calls fill with it, then commits it and returns it as committed. When
// fill returns an error the batch is left open (not committed) and the error is returned.
func (c *Client) Batch(ctx context.Context, spec BatchNew, fill func(*BatchHandle) error) (*BatchStatus, error) {
	opened, err := c.CreateBatch(ctx, spec)
	if err != nil {
		return nil, err
	}
	if err := fill(&BatchHandle{BID: opened.BID, client: c}); err != nil {
		return nil, err
	}
	return c.CommitBatch(ctx, opened.BID)
}

// InBatch opens an existing batch again, calls fill, and commits it: how a member job adds
// work to its own batch (job.Batch names it).
func (c *Client) InBatch(ctx context.Context, bid string, fill func(*BatchHandle) error) (*BatchStatus, error) {
	if _, err := c.ReopenBatch(ctx, bid); err != nil {
		return nil, err
	}
	if err := fill(&BatchHandle{BID: bid, client: c}); err != nil {
		return nil, err
	}
	return c.CommitBatch(ctx, bid)
}

// CreateBatch opens a new batch (Batch wraps this, fill and the commit).
func (c *Client) CreateBatch(ctx context.Context, spec BatchNew) (*BatchStatus, error) {
	for _, cb := range []*JobSpec{spec.OnComplete, spec.OnSuccess, spec.OnDeath} {
		if cb != nil && cb.JID == "" {
			cb.JID = NewJID()
		}
	}
	var status BatchStatus
	// Not repeatable: a request whose answer was lost may have opened the batch, and sending it
	// again would open a second one.
	return &status, c.callWith(ctx, "POST", "/v1/batches", nil, spec, &status, 0, false)
}

// ReopenBatch opens a committed batch again (ErrBatchClosed once it has finished).
func (c *Client) ReopenBatch(ctx context.Context, bid string) (*BatchStatus, error) {
	var status BatchStatus
	return &status, c.call(ctx, "POST", "/v1/batches/"+url.PathEscape(bid)+"/open", map[string]any{}, &status, 0)
}

// CommitBatch commits the batch: it finishes once no member is pending.
func (c *Client) CommitBatch(ctx context.Context, bid string) (*BatchStatus, error) {
	var status BatchStatus
	return &status, c.call(ctx, "POST", "/v1/batches/"+url.PathEscape(bid)+"/commit", map[string]any{}, &status, 0)
}

// BatchStatus reads how the batch stands (ErrBatchNotFound when there is none).
func (c *Client) BatchStatus(ctx context.Context, bid string) (*BatchStatus, error) {
	var status BatchStatus
	return &status, c.call(ctx, "GET", "/v1/batches/"+url.PathEscape(bid), nil, &status, 0)
}
