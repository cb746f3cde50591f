"""EntityWorld's vocabulary: first names, surnames, place words and item words.

Names are single capitalized words that are not English words a template could
contain, and no name word is a place word, so a final text's names map back to
characters without ambiguity. Places are one lowercase noun and items two lowercase
words, both rendered with "the" ("the harbor", "the silver key").
"""

FIRST_NAMES = tuple(
    """
    Aaron Abel Ada Adele Adrian Agatha Agnes Aidan Alba Albert Alden Aldo Alec Alma Alvin Amara Ambrose
    Amelia Anders Andrei Anika Anna Anselm Anton Anya Arlo Arne Astrid Aurelia Axel Basil Beatrix Benedikt
    Bertram Bianca Boris Bruno Caius Calla Camilla Carla Casimir Cassius Cecil Cedric Celeste Cillian Clara
    Clement Corin Cosima Cyril Dagny Dalia Damian Dario Delia Desmond Dimitri Dora Dorian Edda Edgar Edith
    Edmund Egon Elias Elin Eliza Elmer Elsa Emeric Emil Enzo Erik Esme Esther Ettore Eudora Ezra Fabian
    Felix Fenna Ferdinand Fiona Flavia Florian Freya Gaspard Gemma Gideon Gilda Giselle Gunnar Gustav
    Hadrian Hakon Halvard Hanna Hector Heidi Helga Henrik Hilda Hugo Ida Igor Ilse Imre Ines Ingrid Isidore
    Ismay Ivan Ivo Jasper Joaquin Jorah Josef Judit Julian Juno Kaspar Katya Kazimir Kirsten Klara Konrad
    Lars Leander Leonie Leopold Lena Linus Livia Lorcan Lotte Lucian Ludmila Luka Lydia Magda Magnus Malin
    Marek Marius Marta Matthias Maxim Mirela Miro Nadia Nestor Nika Nils Nina Noemi Octavia Odile Olaf Olga
    Orla Osric Otto Pavel Petra Philippa Pia Quentin Quinta Radek Ragna Rainer Regina Remus Rhea Rolf Rosalind
    Rupert Sabina Sander Saskia Selma Severin Sigrid Silas Simone Sirin Soren Stellan Sven Tamsin Tatiana
    Teodor Thea Tibor Tilda Tobias Tomas Ulla Ulric Una Ursula Valentin Vera Viggo Vilma Vincent Viola Vito
    Walther Wanda Wilhelm Xenia Yara Yusuf Zara Zeno Zora Alaric Anouk Bodil Brynja Cato Darya Eamon Eirik
    Elvira Emrys Ferran Greta Hamish Idris Isolde Jarek Kalle Lisbet Mattis Minna Nevin Oskar Paloma Ragnar
    Rurik Signe Taavi Torvald Ulrike Vesna Wendel Ysolde Zdenek Annika Bastian Colette Dagmar Evander Fritjof
    Gwendolyn Haldor Irmgard Jonas Kasimir Leif Margit Niamh Ottilie Per Reinhold Svea Tilde Ulf Veit Wiebke
    """.split()
)

SURNAMES = tuple(
    """
    Abbot Achterberg Adler Albrecht Alcott Ambler Arkwright Asher Aston Auclair Bachmann Bairstow Balfour
    Barlowe Bassett Beckwith Bellamy Benning Berger Birkett Blackwood Blythe Bosworth Bramley Brandt Brennan
    Brinkley Buckland Burgess Calloway Carden Castellan Chadwick Chandler Colville Cordell Crane Croft
    Dalgliesh Darrow Davenport Delacroix Denholm Dietrich Dorsey Drummond Dunmore Eastwick Eckhart Ellery
    Elsworth Engel Everard Fairbanks Falkner Farrow Fenwick Fischer Fitzroy Fleming Forsythe Fraser Fuchs
    Gallagher Garrick Gerhardt Gilmore Glenister Goodwin Granger Gresham Grimshaw Hadley Halloran Hamlyn
    Hargreave Hartmann Haskell Hathaway Hayward Heller Hendry Hillard Holloway Horvath Huxley Ingram Irving
    Jagger Jameson Jansen Jessop Kavanagh Keller Kendrick Kessler Kilbride Kingsley Kirkland Klein Koenig
    Lachlan Lambert Langley Larkin Lassiter Lindqvist Lockhart Lorimer Lovell Ludlow Macallan Mallory Marlowe
    Maxwell Mayhew Merriman Metcalfe Molyneux Montague Mortimer Munro Navarro Nesbitt Neumann Norcross
    Novak Oakes Ogilvy Oldham Osborne Pemberton Pendleton Penrose Petrov Pickering Prescott Quigley Radcliffe
    Ramsay Ravenhill Redfern Reinholt Rowntree Rutherford Sandoval Saxby Schreiber Sedgwick Selwyn Shelby
    Sinclair Somerset Stanhope Steiner Strickland Sutherland Tallis Templeton Thackeray Thorne Townsend
    Trevelyan Tulliver Underhill Urquhart Valmont Vance Varga Vasquez Verity Villiers Voss Wainwright
    Wakefield Walcott Warrick Waverley Weatherby Wexley Whitlock Wilder Winslow Wolcott Wyndham Yardley
    Yorke Zeller Zimmer Aldridge Ashdown Bancroft Blackburn Carmody Challoner Devereux Easton Ferrars
    Galloway Hollister Iverson Jardine Kinnear Lenox Maitland Northcott Ormsby Pryce Quimby Rennick Sterling
    Tremaine Upton Vickery Wetherell Yeager Zoltan Amberley Birchall Cavendish Dunstan Escott Featherstone
    Gaskell Heathcote Ilchester Jellicoe Kettering Linfield Mountjoy Nettleton Orrell Pettigrew Quaife
    Rainsford Stackhouse Thistlewood Ulverston Vardy Whitcombe Ashcombe Brockway Cheswick Dunleavy Ellwood
    Fothergill Gascoigne Harcourt Ivey Jephson Keswick Loxley Marchbank Nethercott Oxley Pennington Rooksby
    Scrivener Tollemache Uxbridge Vosper Wolstenholme Yelland Zouch Abernethy Blakeney Carrow Duckworth
    """.split()
)

# One common noun each, written "the harbor": a unit's place is then a choice among the
# scene's two to four, not a name to spell out. (Two-word names built from shared parts,
# "Old Harbor", made small models write blends of the scene's names, "East Crossing" in a
# scene with Green Gate and Black Crossing, which the checker could only call unknown places.)
PLACES = tuple(
    """
    harbor bridge mill tower forest valley market castle abbey meadow crossing hollow quarry chapel
    orchard inn lighthouse monastery garrison ferry vineyard citadel cove ridge grove wharf bazaar
    fen moor smithy tannery bakery
    """.split()
)

ITEM_FIRST = tuple("silver golden iron wooden copper jade crystal bone bronze glass ivory leather".split())
ITEM_SECOND = tuple(
    "key map sword ring lantern dagger compass crown chalice amulet horn book mirror shield flute coin".split()
)
ITEMS = tuple(f"{a} {b}" for a in ITEM_FIRST for b in ITEM_SECOND)
