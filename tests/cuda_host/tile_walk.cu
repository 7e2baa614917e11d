// Host check of half.cuh's TileWalk (tests/test_half_streamk.py): over many grids, tile
// counts and k-tile counts, the pieces of all CTAs cover every k-tile of every tile exactly
// once, whole tiles first; a shared tile's pieces come from the CTAs owner(first k-tile) ..
// owner(last k-tile), one each, in k order; partial slots b + a are distinct and < 2 G;
// with a least range length, no range is shorter where the shared k-tiles allow it.
#include <cstdio>
#include <vector>
#include <set>
#include "half.cuh"

template <int MIN_RANGE>
static int check(int tiles, int ktiles, int G, bool sk)
{
    std::vector<int> hits((size_t)tiles * ktiles, 0);
    std::set<int> slots;
    std::vector<std::vector<std::pair<int, int>>> by_tile(tiles);   // (b, kb) of shared pieces
    int rem = 0, dp = tiles;
    for (int b = 0; b < G; ++b) {
        TileWalk<MIN_RANGE> w(tiles, ktiles, sk, G, b);
        rem = w.rem; dp = w.dp;
        int t, kb, ke, a, last_whole = -1;
        for (int n = 0; w.piece(n, t, kb, ke, a); ++n) {
            if (n > 10 * (tiles + 2)) { printf("FAIL endless walk %d %d %d\n", tiles, ktiles, G); return 1; }
            if (t < 0 || t >= tiles || kb < 0 || ke > ktiles || kb >= ke) {
                printf("FAIL piece t=%d [%d,%d) tiles=%d kt=%d G=%d b=%d\n", t, kb, ke, tiles, ktiles, G, b); return 1;
            }
            if (a < 0) {
                if (t >= dp || kb != 0 || ke != ktiles || t % G != b || t <= last_whole) { printf("FAIL whole\n"); return 1; }
                last_whole = t;
            } else {
                if (t != dp + a) { printf("FAIL shared tile index\n"); return 1; }
                if (!slots.insert(b + a).second || b + a >= 2 * G) { printf("FAIL slot %d\n", b + a); return 1; }
                by_tile[t].push_back({b, kb});
            }
            // a range is at least MIN_RANGE k-tiles long where the shared k-tiles allow it: a
            // piece is shorter only at a tile's edge (the range runs on into the next tile)
            if (a >= 0 && w.S > 1 && (long long)rem * ktiles / w.S < MIN_RANGE) { printf("FAIL short ranges\n"); return 1; }
            for (int k = kb; k < ke; ++k) hits[(size_t)t * ktiles + k]++;
        }
    }
    for (size_t i = 0; i < hits.size(); ++i)
        if (hits[i] != 1) { printf("FAIL coverage tile %zu k %zu: %d (tiles=%d kt=%d G=%d sk=%d)\n", i / ktiles, i % ktiles, hits[i], tiles, ktiles, G, sk); return 1; }
    if (sk != (rem == tiles % G && sk) || (!sk && rem != 0)) { printf("FAIL rem\n"); return 1; }
    for (int a = 0; a < rem; ++a) {
        const TileWalk<MIN_RANGE> w(tiles, ktiles, sk, G, 0);
        const int first = w.owner(a * ktiles), last = w.owner(a * ktiles + ktiles - 1);
        const auto& ps = by_tile[dp + a];
        if ((int)ps.size() != last - first + 1) { printf("FAIL arrivals tile %d: %zu pieces, owners %d..%d\n", a, ps.size(), first, last); return 1; }
        for (size_t i = 0; i < ps.size(); ++i)
            if (ps[i].first != first + (int)i || (i > 0 && ps[i].second <= ps[i - 1].second)) { printf("FAIL order\n"); return 1; }
    }
    return 0;
}

int main()
{
    int cases = 0;
    const int grids[] = {1, 2, 3, 7, 66, 132, 264};
    for (int G : grids)
        for (int tiles = 1; tiles <= 3 * G + 5; tiles += (tiles < 40 ? 1 : 7))
            for (int ktiles : {1, 2, 3, 5, 16, 47, 128})
                for (int sk = 0; sk < 2; ++sk) {
                    if (check<1>(tiles, ktiles, G, sk) || check<8>(tiles, ktiles, G, sk)) return 1;
                    cases += 2;
                }
    printf("ok %d cases\n", cases);
    return 0;
}
