package storage

// Page bookkeeping is one rule for every backend: a page starts after the
// position its cursor names (the first page at the list's start) and takes
// the items in list order until Limit are taken; one item more, read but
// not taken, proves a next page: HasNext, and LastKey is the cursor of the
// position of the page's last item, with the items before the next page
// as its offset. A backend reads the items in list order from the
// position StartPage gives (the seek, the query: its own part) and counts
// them with the Page, one by one (Take) or read at once (PageOf).

// Page counts the items of one page of a list as a backend reads them.
// It is a value: a backend that retries a read starts again from a copy.
type Page struct {
	cursors Cursors
	list    List
	info    PageInfo
}

// StartPage begins the page of list that req asks for: it returns the
// page to count the items with and the position the page starts after,
// nil for the first page. A cursor not issued for list by c is
// ErrBadCursor.
func (c Cursors) StartPage(list List, req PageRequest) (Page, []byte, error) {
	p := Page{cursors: c, list: list, info: PageInfo{Limit: req.Limit}}
	if req.Cursor == "" {
		return p, nil, nil
	}
	after, offset, err := c.Decode(list, req.Cursor)
	if err != nil {
		return p, nil, err
	}
	p.info.Offset = offset
	return p, after, nil
}

// Take reports whether the item the backend has just found, the next in
// list order, belongs to the page, and counts it. When the page is full it
// does not: the item proves a next page, and the reading stops.
func (p *Page) Take() bool {
	if p.info.Count >= p.info.Limit {
		p.info.HasNext = true
		return false
	}
	p.info.Count++
	return true
}

// Info describes the page read. last is the position of its last item; it
// is read only when there is a next page.
func (p *Page) Info(last []byte) PageInfo {
	info := p.info
	if info.HasNext {
		info.LastKey = p.cursors.Encode(p.list, last, info.Offset+info.Count)
	}
	return info
}

// PageOf counts items, read at once in list order from where the page
// starts (at most Limit+1 are needed), and returns those that belong to
// the page with its description. pos gives an item's position; it is
// called only for the page's last item when there is a next page.
func PageOf[T any](p *Page, items []T, pos func(*T) string) ([]T, PageInfo) {
	if room := max(0, p.info.Limit-p.info.Count); len(items) > room {
		items = items[:room]
		p.info.HasNext = true
	}
	p.info.Count += len(items)
	var last []byte
	if p.info.HasNext && len(items) > 0 {
		last = []byte(pos(&items[len(items)-1]))
	}
	return items, p.Info(last)
}
