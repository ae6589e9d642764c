package storage_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/storage"
)

// walk reads one page of items (positions in list order) as a backend
// does, starting after the cursor's position: one by one with Take when
// oneByOne, else Limit+1 at once with PageOf.
func walk(t testing.TB, c storage.Cursors, list storage.List, items []string, req storage.PageRequest, oneByOne bool) ([]string, storage.PageInfo) {
	t.Helper()
	page, after, err := c.StartPage(list, req)
	require.NoError(t, err)
	rest := items
	for len(rest) > 0 && after != nil && rest[0] <= string(after) {
		rest = rest[1:]
	}
	if !oneByOne {
		return storage.PageOf(&page, rest[:min(len(rest), req.Limit+1)], func(s *string) string { return *s })
	}
	var got []string
	var last []byte
	for _, it := range rest {
		if !page.Take() {
			break
		}
		got = append(got, it)
		last = append(last[:0], it...)
	}
	return got, page.Info(last)
}

func TestPage(t *testing.T) {
	t.Parallel()
	c := storage.NewCursors([]byte("page key"))
	list := storage.UserList("org")
	items := []string{"a", "b", "c", "d", "e"}
	tests := []struct {
		name   string
		items  []string
		limit  int
		pages  [][]string // the pages of a walk from the start to the end
		offset []int
	}{
		{name: "empty list", items: nil, limit: 2, pages: [][]string{nil}, offset: []int{0}},
		{name: "one short page", items: items[:1], limit: 2, pages: [][]string{{"a"}}, offset: []int{0}},
		{name: "exactly one page", items: items[:2], limit: 2, pages: [][]string{{"a", "b"}}, offset: []int{0}},
		{name: "a last short page", items: items, limit: 2, pages: [][]string{{"a", "b"}, {"c", "d"}, {"e"}}, offset: []int{0, 2, 4}},
		{name: "a last full page", items: items[:4], limit: 2, pages: [][]string{{"a", "b"}, {"c", "d"}}, offset: []int{0, 2}},
		{name: "pages of one", items: items[:3], limit: 1, pages: [][]string{{"a"}, {"b"}, {"c"}}, offset: []int{0, 1, 2}},
	}
	for _, tt := range tests {
		for _, oneByOne := range []bool{true, false} {
			name := tt.name + ", PageOf"
			if oneByOne {
				name = tt.name + ", Take"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				req := storage.PageRequest{Limit: tt.limit}
				for i, want := range tt.pages {
					got, info := walk(t, c, list, tt.items, req, oneByOne)
					if len(want) == 0 {
						require.Empty(t, got)
					} else {
						require.Equal(t, want, got, "page %d", i)
					}
					last := i == len(tt.pages)-1
					require.Equal(t, storage.PageInfo{Count: len(want), HasNext: !last, Limit: tt.limit, Offset: tt.offset[i], LastKey: info.LastKey}, info, "page %d", i)
					if last {
						require.Empty(t, info.LastKey)
						break
					}
					pos, offset, err := c.Decode(list, info.LastKey)
					require.NoError(t, err)
					require.Equal(t, want[len(want)-1], string(pos), "the cursor names the page's last item")
					require.Equal(t, tt.offset[i]+len(want), offset)
					req.Cursor = info.LastKey
				}
			})
		}
	}
}

func TestStartPage(t *testing.T) {
	t.Parallel()
	c := storage.NewCursors([]byte("page key"))
	list := storage.UserList("org")
	page, after, err := c.StartPage(list, storage.PageRequest{Limit: 3})
	require.NoError(t, err)
	require.Nil(t, after, "the first page starts at the list's start")
	require.Equal(t, storage.PageInfo{Limit: 3}, page.Info(nil))

	cursor := c.Encode(list, []byte("b"), 7)
	page, after, err = c.StartPage(list, storage.PageRequest{Limit: 3, Cursor: cursor})
	require.NoError(t, err)
	require.Equal(t, "b", string(after))
	require.Equal(t, storage.PageInfo{Limit: 3, Offset: 7}, page.Info(nil))

	_, _, err = c.StartPage(storage.UserList("other"), storage.PageRequest{Limit: 3, Cursor: cursor})
	require.ErrorIs(t, err, storage.ErrBadCursor, "a cursor of another list")
	_, _, err = c.StartPage(list, storage.PageRequest{Limit: 3, Cursor: cursor + "x"})
	require.ErrorIs(t, err, storage.ErrBadCursor, "an altered cursor")
}
